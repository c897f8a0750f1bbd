/*
 * prefault.h — cgjit's own code, read-only data and a reserve of its metadata memory made
 * present once as cgjit starts (CGJIT_PREFAULT), so that the first time a program takes one of
 * cgjit's paths costs it no page faults. See prefault.c.
 */
#ifndef CGJ_PREFAULT_H
#define CGJ_PREFAULT_H

void cgj_prefault(void);

#endif /* CGJ_PREFAULT_H */
