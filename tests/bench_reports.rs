//! The benches' report code (`benches/common/report.rs`: JSON through
//! serde, SVG plots through plotters) needs no GPU, but the bench targets
//! have their own `main` (`harness = false`), so unit tests inside them
//! never run. This target includes the file so its tests run with the
//! workspace's (`cargo test --test bench_reports`).

#[allow(dead_code)]
#[path = "../benches/common/report.rs"]
mod report;
