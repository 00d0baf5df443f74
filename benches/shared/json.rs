//! The JSON answer the compression benches use, made the same way by benches/compress.rs
//! and examples/bench_upstream.rs (which includes this file by path): `len` bytes of
//! records such as an API lists, with ids, names, numbers and flags that vary, so that it
//! shrinks as real JSON does (not as a repeated line would).

/// `len` bytes of JSON records.
pub fn json(len: usize) -> bytes::Bytes {
    let mut out = String::from("[");
    let mut i = 0u64;
    while out.len() < len {
        let city = ["Oslo", "Lyon", "Porto", "Graz"][i as usize % 4];
        out.push_str(&format!(
            "{{\"id\":{i},\"user\":\"user{}\",\"city\":\"{city}\",\"score\":{},\"active\":{},\"tags\":[\"t{}\",\"t{}\"]}},",
            i * 31 % 977,
            (i * 7919) % 10_007,
            i.is_multiple_of(3),
            i % 13,
            i % 7
        ));
        i += 1;
    }
    out.truncate(len - 1);
    out.push(']');
    bytes::Bytes::from(out)
}
