#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| udf_host::fuzzing::plugin_array(data));
