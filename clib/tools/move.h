/* move.h — the parts the move at login (login.c) shares with the move back (move-out.c). Each
 * reports a failure as one line on stderr (dconf-tool.h). */
#ifndef KVD_MOVE_H
#define KVD_MOVE_H

#include "dconf-tool.h"

/* The name of the user's dconf database (`user-db:NAME` of their profile; "user" by default).
 * A new string. */
char *user_database(void);
/* The user's own dconf values as `dconf dump /` prints them (never the site's databases'): a new
 * string in `output`; FALSE after saying why. */
gboolean dump_own(char **output);
/* Records `side` ("kvd" or "dconf") as the user's own io.kvd.gnome settingsIn, ending a move
 * begun (movingSince removed), atomically; 0, or 1 after saying why. */
int record_side(kvd_client *client, const char *side);
/* kvd's values back into dconf, as one change set of dconf's (move-out.c); 0, or 1 after saying
 * why (dconf then holds what it held before, or all of the move). */
int move_out(kvd_client *client);

/* After a move back (the record says "dconf"), each key it wrote into dconf (dconf-moved-out)
 * that `dump` (dconf's keyfile now) lacks — the user reset it under dconf — is reset in kvd, unless
 * kvd's value is not the user's (an admin's, a lock) or changed since the move back. When dconf
 * holds none of many such keys (its database replaced or lost), nothing is reset (said). 0, or 1
 * after saying why. */
int carry_resets(kvd_client *client, GKeyFile *dump);

#endif
