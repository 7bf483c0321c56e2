/// The bash script. bash hands a completion function the line as typed, and readline replaces
/// only its own part of the word (after an opening quote, or after a `=` or `:`), inserting
/// what the function offers as it is. So the script reads the line itself as bash will
/// (``bashWords``: quotes and backslashes removed, nothing expanded or run), matches kvd's names
/// (read NUL-separated with `--null`, exactly as stored) against the word as bash will pass it,
/// and offers readline's part as typed followed by the rest of the name quoted for the quoting
/// in force at the cursor (``bashQuoting``); readline closes an open quote itself.
extension Completion {
    static var bashScript: String {
        """
        # bash completion for kvctl; made by `kvctl completion bash`. Load it with
        #   source <(kvctl completion bash)
        # or install it as bash-completion's completions/kvctl.

        \(shSlotsFunction)\(bashWords)\(bashQuoting)
        # kvctl with the --socket/--system of the line being completed, never starting kvd,
        # errors hidden.
        _kvctl_ask() {
            local -a connection=(--no-autostart)
            local i
            for ((i = 1; i < ${#_kvctl_words[@]} - 1; i++)); do
                case ${_kvctl_words[i]} in
                    --system) connection+=(--system) ;;
                    --socket) connection+=(--socket "${_kvctl_words[i+1]}"); ((i++)) ;;
                    --socket=*) connection+=("${_kvctl_words[i]}") ;;
                    -*) ;;
                    *) break ;;
                esac
            done
            "${_kvctl_words[0]}" "${connection[@]}" "$@" 2>/dev/null
        }

        # Offers the names on standard input (each ended by a NUL) that start with $1, the word
        # as bash will pass it; $2 is readline's part of the word, as typed.
        _kvctl_offer() {
            local name
            while IFS= read -r -d '' name; do
                [[ $name == "$1"* ]] || continue
                _kvctl_quote "${name:${#1}}"
                COMPREPLY+=("$2$_kvctl_quoted")
            done
        }

        _kvctl() {
            local -a _kvctl_words
            local _kvctl_state _kvctl_quoted
            _kvctl_split
            local -a words=("${_kvctl_words[@]}")
            local cword=$((${#words[@]} - 1)) i=1 command="" slot
            local cur=${words[cword]} typed=$2
            COMPREPLY=()
            while ((i < cword)); do
                case ${words[i]} in
                    --socket) ((i += 2)) ;;
                    -*) ((i++)) ;;
                    *) command=${words[i]}; break ;;
                esac
            done
            if [[ -z $command ]]; then
                if [[ ${words[cword-1]} == --socket || $cur == --socket=* ]]; then
                    compopt -o filenames 2>/dev/null
                    mapfile -t COMPREPLY < <(compgen -f -- "${cur#--socket=}")
                elif [[ $cur == -* ]]; then
                    mapfile -t COMPREPLY < <(compgen -W "\(words(globalOptions))" -- "$cur")
                else
                    mapfile -t COMPREPLY < <(compgen -W "\(words(commandNames))" -- "$cur")
                fi
                return
            fi
            local -a slots
            read -ra slots <<< "$(_kvctl_slots "$command")"
            slot=${slots[cword - i - 1]:-}
            [[ -z $slot && ${#slots[@]} -gt 0 && ${slots[-1]} == value ]] && slot=value
            case $slot in
                domain) _kvctl_offer "$cur" "$typed" < <(printf '%s\\0' -g; _kvctl_ask --null domains) ;;
                key) _kvctl_offer "$cur" "$typed" < <(_kvctl_ask --null keys "${words[i+1]}") ;;
                file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
                command) mapfile -t COMPREPLY < <(compgen -W "\(words(commandNames))" -- "$cur") ;;
                value) [[ $cur == -* ]] && mapfile -t COMPREPLY < <(compgen -W "\(words(typeFlags))" -- "$cur") ;;
                --* | *'|'*) mapfile -t COMPREPLY < <(compgen -W "${slot//|/ }" -- "$cur") ;;
            esac
        }
        complete -o default -F _kvctl kvctl

        """
    }

    /// `_kvctl_split`: the words of the command line up to the cursor as bash will pass them,
    /// the last one being completed, in `_kvctl_words`; the quoting open at the cursor in
    /// `_kvctl_state` (empty, `'`, `"` or `$'`). Reads `'...'`, `"..."`, `$'...'` and
    /// backslashes as bash does; `$`, backquotes and globs stay as typed (nothing is expanded).
    static let bashWords = #"""
        # The words of the line up to the cursor as bash will pass them, quotes and backslashes
        # removed, nothing expanded or run: _kvctl_words (the last is the word being completed);
        # the quoting open at the cursor: _kvctl_state ("", "'", '"' or "$'").
        _kvctl_split() {
            local line=${COMP_LINE:0:COMP_POINT} word="" started="" state="" c digits
            local -a BASH_REMATCH
            local -i i=0 n=${#line}
            _kvctl_words=()
            while ((i < n)); do
                c=${line:i:1}
                ((i++))
                case $state in
                    "")
                        case $c in
                            ' ' | $'\t' | $'\n')
                                [[ -n $started ]] && _kvctl_words+=("$word")
                                word="" started="" ;;
                            ';' | '|' | '&') _kvctl_words=() word="" started="" ;;
                            '\')
                                started=1
                                if ((i < n)); then
                                    [[ ${line:i:1} == $'\n' ]] || word+=${line:i:1}
                                    ((i++))
                                fi ;;
                            "'") started=1 state="'" ;;
                            '"') started=1 state='"' ;;
                            '$')
                                started=1
                                case ${line:i:1} in
                                    "'") state="\$'"; ((i++)) ;;
                                    '"') state='"'; ((i++)) ;;
                                    *) word+=$c ;;
                                esac ;;
                            *) started=1 word+=$c ;;
                        esac ;;
                    "'") if [[ $c == "'" ]]; then state=""; else word+=$c; fi ;;
                    '"')
                        case $c in
                            '"') state="" ;;
                            '\')
                                case ${line:i:1} in
                                    '$' | '`' | '"' | '\') word+=${line:i:1}; ((i++)) ;;
                                    $'\n') ((i++)) ;;
                                    *) word+=$c ;;
                                esac ;;
                            *) word+=$c ;;
                        esac ;;
                    *)
                        case $c in
                            "'") state="" ;;
                            '\')
                                c=${line:i:1}
                                ((i++))
                                case $c in
                                    n) word+=$'\n' ;; t) word+=$'\t' ;; r) word+=$'\r' ;;
                                    a) word+=$'\a' ;; b) word+=$'\b' ;; e | E) word+=$'\e' ;;
                                    f) word+=$'\f' ;; v) word+=$'\v' ;;
                                    x | u | U)
                                        if [[ ${line:i:8} =~ ^[0-9a-fA-F]+ ]]; then
                                            case $c in x) digits=${BASH_REMATCH[0]:0:2} ;; u) digits=${BASH_REMATCH[0]:0:4} ;; *) digits=${BASH_REMATCH[0]} ;; esac
                                            ((i += ${#digits}))
                                            printf -v c "\\$c$digits"
                                            word+=$c
                                        else
                                            word+="\\$c"
                                        fi ;;
                                    [0-7])
                                        [[ ${line:i-1:3} =~ ^[0-7]+ ]]
                                        ((i += ${#BASH_REMATCH[0]} - 1))
                                        printf -v c "\\${BASH_REMATCH[0]}"
                                        word+=$c ;;
                                    "'" | '"' | '\' | '?') word+=$c ;;
                                    *) word+="\\$c" ;;
                                esac ;;
                            *) word+=$c ;;
                        esac ;;
                esac
            done
            _kvctl_words+=("$word")
            _kvctl_state=$state
        }

        """#

    /// `_kvctl_quote REST`: REST (the part of a name after what was typed) quoted for the
    /// quoting open at the cursor, in `_kvctl_quoted`: backslashes outside quotes (`$'\n'` for
    /// a control character); inside `'...'` or `"..."`, the quote closed for a `'` (`'\''`), a
    /// `!` (`"\!"`) or a control character (`'$'\n''`) and opened again; escapes inside
    /// `$'...'`. A name that ends in a reopened quote gets it closed (readline adds no closing
    /// quote after a quote character).
    static let bashQuoting = #"""
        # $1 (the rest of a name) quoted for the quoting open at the cursor, in _kvctl_quoted.
        _kvctl_quote() {
            local c q reopened=""
            local -i i
            _kvctl_quoted=""
            for ((i = 0; i < ${#1}; i++)); do
                c=${1:i:1}
                reopened=""
                case $_kvctl_state in
                    "") printf -v q '%q' "$c"; _kvctl_quoted+=$q ;;
                    "'")
                        case $c in
                            "'") _kvctl_quoted+="'\''" reopened=1 ;;
                            [[:cntrl:]]) printf -v q '%q' "$c"; _kvctl_quoted+="'$q'" reopened=1 ;;
                            *) _kvctl_quoted+=$c ;;
                        esac ;;
                    '"')
                        case $c in
                            '$' | '`' | '"' | '\') _kvctl_quoted+="\\$c" ;;
                            '!') _kvctl_quoted+='"\!"' reopened=1 ;;
                            [[:cntrl:]]) printf -v q '%q' "$c"; _kvctl_quoted+="\"$q\"" reopened=1 ;;
                            *) _kvctl_quoted+=$c ;;
                        esac ;;
                    *)
                        case $c in
                            '\') _kvctl_quoted+='\\' ;;
                            "'" | [[:cntrl:]]) printf -v q '\\x%02x' "'$c"; _kvctl_quoted+=$q ;;
                            *) _kvctl_quoted+=$c ;;
                        esac ;;
                esac
            done
            [[ -n $reopened ]] && _kvctl_quoted+=${_kvctl_state: -1}
        }

        """#
}
