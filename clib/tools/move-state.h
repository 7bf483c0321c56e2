/* move-state.h — what the move at login keeps beside kvd, in the user's state folder
 * ($XDG_STATE_HOME/kvd, else ~/.local/state/kvd), each file the user's own (0600):
 *   dconf-moved-in       the GSettings paths the last move into kvd wrote, one per line: the
 *                        move back resets in dconf only those kvd no longer has (a key written
 *                        straight into dconf meanwhile is never reset); absent: no resets.
 *   dconf-moved-out      the GSettings paths the last move back wrote into dconf: the next move
 *                        into kvd resets in kvd those dconf no longer has (reset under dconf).
 *   dconf-move-pending   a move into kvd was tried while kvd could not be reached (the session
 *                        may have written to kvd since): the retry keeps every key kvd holds.
 *   dconf-move-out       a move back begun and not done: what dconf held when it began (the
 *                        dump's text) and the change set it was to write (GVariant (sa{smv}),
 *                        binary): a retry keeps what the user changed in dconf since. */
#ifndef KVD_MOVE_STATE_H
#define KVD_MOVE_STATE_H

#include <glib.h>

gboolean pending_marker_exists(void);
void write_pending_marker(void);
void remove_pending_marker(void);
/* Writes the list atomically; 0, or 1 after saying why. */
int save_moved_in(GPtrArray *paths);
/* The paths of the last move into kvd (a set; empty when none is recorded). */
GHashTable *load_moved_in(void);
void forget_moved_in(void);
/* The same for the paths the last move back wrote (dconf-moved-out). */
int save_moved_out(GPtrArray *paths);
GHashTable *load_moved_out(void);
void forget_moved_out(void);
/* The move back's record (a (sa{smv}) GVariant, not floating), or NULL when none is kept (or it
 * cannot be read: then none). */
GVariant *load_move_out(void);
/* Writes it atomically; 0, or 1 after saying why. */
int save_move_out(GVariant *record);
void forget_move_out(void);

#endif
