//! Integration tests, one binary: the control plane, metrics, observers, MQTT over TLS, the inference benchmark.

#[path = "../common/mod.rs"]
mod common;

mod alerts;
mod bench_infer;
mod bounded_book;
mod churn;
mod control;
mod default_budget;
mod hostile_http;
mod hostile_inputs;
mod hostile_peers;
mod inputs;
mod lifecycle;
mod memory;
mod metrics;
#[cfg(feature = "mqtt")]
mod mqtt_tls;
mod observe;
mod start;
mod starve;
