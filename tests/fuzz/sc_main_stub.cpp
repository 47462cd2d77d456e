// libsystemc.so, which the stack's libraries link, calls sc_main from its own main(). A fuzz target has its own main
// (libFuzzer's or tests/fuzz/replay_main.cpp) and never elaborates a SystemC model, but the link needs the symbol.
extern "C" int sc_main(int /*argc*/, char* /*argv*/[]) {
  return 0;
}
