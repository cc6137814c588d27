// The fuzzers' default UBSan options, compiled in so that a fuzzer run by
// hand reports as fuzz/run does: with a stack. UBSAN_OPTIONS in the
// environment still wins.

extern "C" const char* __ubsan_default_options() {
  return "print_stacktrace=1";
}
