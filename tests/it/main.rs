//! The root integration tests, one binary so they link once: each module is one
//! suite (its `//!` header says what it proves), `common` is the shared harness that
//! runs the real `retail-media` binary and finds the real servers (`RM_*` settings).
//!
//! Suites that stop a shared server (a broker, ClickHouse, PostgreSQL) take
//! `common::servers` exclusively; every suite that uses one holds it shared for the
//! test's life, so one binary runs them all in parallel without one test pulling a
//! server from under another.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

mod ad_reports;
mod aggregate_exact;
mod analyst_page;
mod api_partner;
mod api_schemathesis;
mod api_state_suite;
mod architecture;
mod auth_limits;
mod billable_clicks;
mod click_window;
mod connection_hygiene;
mod consent_tcf;
mod deploy_artifacts;
mod edge_embedded;
mod edge_impressions;
mod edge_kafka;
mod fair_shares;
mod hostile_traffic;
mod inspector;
mod invalid_traffic;
mod kafka_broker_loss;
mod kafka_deploy_claims;
mod kafka_group_failover;
mod kafka_rolling_restart;
mod openapi_conformance;
mod ops_listener;
mod prometheus_scrape;
mod report_pages;
mod scale_out;
mod sdk_browser;
mod served_ads;
mod settings;
mod shopper_erasure;
mod spend_limits;
mod tenancy;
mod vast_playback;
mod zoned_reports;
