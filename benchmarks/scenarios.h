// The scenarios, as a worker process runs them: spool's (through its public
// API, with internal headers only to write set-up data fast and to time the
// scheduler's in-memory next-task selection), the peers' (through
// benchmarks/peers/peer.h), and the codec microbenchmarks (Google
// Benchmark).
//
// Each function runs every round of one scenario for one system and reports
// rows through `out`. A failed set-up or measurement is returned as an error;
// a wait that runs out ends the process (Abandon), since a hung system
// cannot be closed.

#ifndef SPOOL_BENCHMARKS_SCENARIOS_H_
#define SPOOL_BENCHMARKS_SCENARIOS_H_

#include <string>

#include <spool/options.h>
#include <spool/status.h>

#include "benchmarks/bench_util.h"

namespace spool::bench {

// Runs `scenario` for spool. `base` is the loaded configuration; the bench
// overrides only storage.path (a fresh directory per round) and, per
// variant, storage.durability and runtime.workers.
Status RunSpoolScenario(const std::string& scenario, const Plan& plan,
                        const Options& base, Reporter* out);

// Runs `scenario` ("enqueue", "drain" or "caller_thread") for peer `peer`.
// With `with_cpu`, the enqueue scenario also reports the caller-thread CPU
// time of its sequential calls as caller_thread rows. Returns NotSupported
// when the peer cannot run here (after noting why).
Status RunPeerScenario(const std::string& peer, const std::string& scenario,
                       const Plan& plan, int concurrency, bool with_cpu,
                       Reporter* out);

// Runs the codec microbenchmarks (Google Benchmark) with `plan.rounds`
// repetitions and reports each one's median.
Status RunCodecScenario(const Plan& plan, Reporter* out);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_SCENARIOS_H_
