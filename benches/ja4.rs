//! `$ja4`'s cost per TLS connection: the fingerprint of a real ClientHello (rustls's, with
//! SNI, ALPN `h2` and `http/1.1`, and its key shares), read from the bytes the handshake
//! will read after. Paid only when a text of the file reads `$ja4`.
//!
//! ```text
//! cargo bench --bench ja4
//! ```

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use rustls::pki_types::ServerName;
use tollgate::tls::ja4;

/// The first flight of a rustls client: its ClientHello, as TLS records.
fn client_hello() -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let name = ServerName::try_from("www.example.com").unwrap();
    let mut client = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut bytes = Vec::new();
    client.write_tls(&mut bytes).unwrap();
    bytes
}

fn bench(c: &mut Criterion) {
    let hello = client_hello();
    let ja4::Read::Complete(fingerprint) = ja4::ja4(&hello) else {
        panic!(
            "a ClientHello of {} bytes without a fingerprint",
            hello.len()
        );
    };
    println!("rustls's ClientHello, {} bytes: {fingerprint}", hello.len());
    c.bench_function("ja4/rustls_client_hello", |b| {
        b.iter(|| ja4::ja4(black_box(&hello)))
    });
    let cut = &hello[..hello.len() / 2];
    c.bench_function("ja4/half_a_hello", |b| b.iter(|| ja4::ja4(black_box(cut))));
}

criterion_group!(benches, bench);
criterion_main!(benches);
