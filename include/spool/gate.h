// Gate: a gate whose state the application computes, asked by spool on a
// timer, beside the gates set by hand (Runtime::SetGate).
//
// Tasks whose handler requires a gate (HandlerOptions::requires_gates) wait
// while it is closed, keeping their attempts. A gate registered with
// Runtime::RegisterGate is asked IsOpen() every
// Options::gate_recheck_interval (runtime.gate_recheck_interval_ms), and
// the answer opens or closes it as SetGate would. When a handler defers on
// it (TaskContext::DeferUntilOpen), the gate closes at once and is asked
// again right away: an IsOpen() that says closed keeps it closed; one that
// says open opens it again at the next interval, not sooner, so that a
// handler and a gate that disagree do not spin.
//
// A gate is first asked at Start. Until that first answer is handed on it
// keeps its stored state, like any gate: open, unless it was closed when
// the runtime last ran (gates are stored; see Runtime::SetGate).
//
//   class ApiUp : public spool::Gate {
//    public:
//     bool IsOpen() override { return health_.Load() == Health::kUp; }
//   };
//   runtime->RegisterGate("api", std::make_shared<ApiUp>());
//
// Threading: spool calls IsOpen on a thread of its own (`spool-gates`), one
// gate after another, never on a CAF thread, a worker or the caller's
// thread, and never two calls at once. It may block, but every gate's
// recheck waits for it: keep it quick (read a flag, not the network).
// An IsOpen that throws counts as closed.

#ifndef SPOOL_INCLUDE_GATE_H_
#define SPOOL_INCLUDE_GATE_H_

namespace spool {

class Gate {
 public:
  virtual ~Gate() = default;

  // Whether tasks that require this gate may start now.
  virtual bool IsOpen() = 0;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_GATE_H_
