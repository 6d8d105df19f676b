//! A reader of examples/sharing, with the Rust SDK: maps the producer's
//! object read-only and sums it in place (plain loads, no copy); after
//! the producer revoked it, finds its handle revoked.
use warden_guest::{Error, Portal};

fn main() {
    let producer = Portal::lookup("sharing", 10_000_000_000).expect("the producer");
    let mut sum = [0u8; 8];
    let (n, object) = producer.call_for_memory(b"get", &mut sum).expect("get");
    assert_eq!(n, 8);
    let len = object.size().expect("size");
    let mapping = object.map(0, len, false).expect("map");
    let words = unsafe { std::slice::from_raw_parts(mapping.as_ptr() as *const u32, mapping.len() / 4) };
    let total: u64 = words.iter().map(|&w| w as u64).sum();
    let ok = total == u64::from_le_bytes(sum);
    println!("rust: {} MiB summed in place, sum {}", len >> 20, if ok { "ok" } else { "WRONG" });
    producer.call(b"done").expect("done");
    // The mapping is sealed now; dropping it gives the range back.
    drop(mapping);
    match object.size() {
        Err(e) if e == Error::REVOKED => println!("rust: after the revoke, my view: revoked"),
        other => println!("rust: after the revoke, my view: {:?}", other),
    }
}
