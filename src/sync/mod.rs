//! How blocks arrive: RLP chain files ([`import`]), a consensus client over the Engine API
//! ([`engine`], authenticated by [`jwt`]), or the dev miner ([`dev`]).

pub mod build;
pub mod dev;
pub mod engine;
pub mod engine_blobs;
pub mod engine_reads;
pub mod import;
pub mod jwt;
pub mod payload;
pub mod payload_jobs;
pub mod testing;
