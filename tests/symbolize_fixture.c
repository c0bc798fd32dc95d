/* A library stripped after the build (tests/CMakeLists.txt): only its dynamic symbol table names
 * anything, and hidden_second, a static function, has no name in it. Without debug information,
 * the nearest symbol before hidden_second's code is exported_first: a symbolizer that takes the
 * nearest symbol instead of the one whose extent holds the address names the wrong function. */
int exported_first(int x) { return x * 3 + 1; }
static int __attribute__((noinline)) hidden_second(int x) {
  volatile int y = x;
  return y * 7 + exported_first(y);
}
int exported_third(int x) { return hidden_second(x) + 2; }
typedef int (*function)(int);
function hidden_second_pointer(void) { return hidden_second; }
