//! The parent reads the helper's status records from a pipe the command could in principle
//! write to (a helper bug, a confused fd): any bytes must give records or an error, never a
//! panic, and records that parse must survive their own wire form unchanged.
#![no_main]

use cordon_sandbox::status::{read_records, write_record_to};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(records) = read_records(data) else {
        return;
    };
    let mut wire = Vec::new();
    for record in &records {
        write_record_to(&mut wire, record).expect("writing to a Vec cannot fail");
    }
    let again = read_records(wire.as_slice()).expect("the wire form parses");
    assert_eq!(again, records);
});
