//! The host examples (SPEC X03) run as tests, so they cannot rot: each example file is compiled
//! here as a module and its `run` called with the report turned off.

#[path = "../examples/dag.rs"]
mod dag;
#[path = "../examples/threads_host.rs"]
mod threads_host;
#[path = "../examples/tokio_host.rs"]
mod tokio_host;

#[test]
fn x03_threads_host_example_runs_every_job() {
    // 400 compile jobs of tenant 0 plus 40 of each of tenants 1-3, all run by the drain.
    assert_eq!(threads_host::run(true).unwrap(), 400 + 3 * 40);
}

#[test]
fn x03_tokio_host_example_accounts_for_every_invocation() {
    let [ran, cancelled, expired, refused, aborted] = tokio_host::run(true).unwrap();
    // 60 invocations: every one ends exactly one way (the aborted task has no outcome of its
    // own), and the ledger is back at zero (asserted inside `run`).
    assert_eq!(ran + cancelled + expired + refused + aborted, 60);
    assert!(ran > 0);
    assert_eq!(refused, 0, "no invocation exceeds its tenant's limit of 32");
}

#[test]
fn x03_dag_example_supersedes_and_gates_a_failure() {
    // The example asserts its own outcomes: the superseded compile fails `superseded`, the
    // other compiles succeed, the job gated on the failed linter fails `dependency-failed`,
    // and a second request for the test job joins it (one outcome for both handles).
    dag::main().unwrap();
}
