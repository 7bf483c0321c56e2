#!/bin/sh
# Finding 15: one dconf key whose path kvd cannot name (over 255 bytes of domain + 1,024 of key,
# which dconf holds) makes kvd refuse its whole domain's Apply (InvalidName): the import handles
# only a locked key one by one, so the move fails at every login (and, finding 1, each retry
# overwrites what the user changed under kvd).
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test int32 7
seg=$(printf 'x%.0s' $(seq 1 200))
dconf write "/org/example/long/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/k" "'deep'"
dconf write /org/example/long/sibling "'next to it'"
kvctl --system gnome enable >/dev/null
status=0; login || status=$?
got=$(kvctl get org.example.long sibling 2>/dev/null || echo none)
[ "$status" = 0 ] && [ "$got" = "next to it" ] || defect "a 1,650-byte dconf path: move status $status, its folder's other key in kvd: $got; $(tail -1 "$dir/login.log" | cut -c1-120)…"
fine "the unstorable key named and left out, the rest moved"
