// attrcheck-test: np=2 modes=shadow,emulate
// env: ATTRCHECK_MAX_KEYVALS=40
// expect: tool.limit
// clean
// exit: 0
// native: same-stdout
/* The keyval capacity alone, in both modes: with attrcheck's capacity lowered to 40 keyvals (a
 * testing knob), keyvals 41-100 are made and served by the MPI library, unchecked (tool.limit,
 * once), and the program computes what it computes natively. */
#include "tool_limit.c"  /* the same program */
