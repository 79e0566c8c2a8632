//! `rediss://` with no certificate given: the server is verified against
//! the platform's trust store, which honours `SSL_CERT_FILE` (as
//! rustls-native-certs reads it), so a CA installed on the host is trusted.
//! A test binary of its own: it sets the process's environment.

mod common;

use common::tls::TestCerts;
use common::RedisServer;
use floodgate::store::{RedisStore, StoreErrorKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_in_ssl_cert_file_is_trusted() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs);

    // The wrong CA in the trust store: the certificate does not verify.
    std::env::set_var("SSL_CERT_FILE", &certs.wrong_ca_path);
    let e = RedisStore::from_url(&server.tls_url())
        .unwrap()
        .probe()
        .await
        .expect_err("not trusted");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");

    // The right one: trusted, with nothing given to floodgate.
    std::env::set_var("SSL_CERT_FILE", &certs.ca_pem_path);
    let report = RedisStore::from_url(&server.tls_url())
        .unwrap()
        .probe()
        .await
        .expect("the CA in SSL_CERT_FILE is trusted");
    assert!(report.nodes()[0].tls());
}
