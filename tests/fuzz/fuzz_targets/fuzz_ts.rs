//! Fuzzes the the sktime / aeon `.ts` format loader: `timewarp::formats::parse_bytes` with a
//! `.ts` path, then the conversions of what it parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| timewarp_fuzz::check("fuzz.ts", bytes));
