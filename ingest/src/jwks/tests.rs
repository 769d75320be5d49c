//! The verifier's rules (which keys, which URLs, which tokens) and its transport: a
//! real TLS server with a certificate made here, trusted through a CA file or not, and
//! a list of removed clients that cannot be read.

use super::*;
use rm_auth::client::Scope;

#[test]
fn only_ed25519_keys_are_taken() {
    let doc = br#"{"keys":[
        {"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k1"},
        {"kty":"RSA","n":"abc","e":"AQAB","kid":"k2"},
        {"kty":"OKP","crv":"X25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
    let keys = keys_of(doc).expect("parse");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].0.as_deref(), Some("k1"));
    assert!(keys_of(b"nope").is_err());
}

#[test]
fn https_anywhere_and_http_only_on_loopback() {
    let new = |u: &str| BearerVerifier::new(u, "i", "a", None).map(|_| ());
    assert!(new("http://127.0.0.1:8081/.well-known/jwks.json").is_ok());
    assert!(new("http://localhost:8081/.well-known/jwks.json").is_ok());
    assert!(new("http://[::1]:8081/.well-known/jwks.json").is_ok());
    let e = new("http://api.internal:8081/.well-known/jwks.json").unwrap_err();
    assert!(e.contains("https://"), "{e}");
    assert!(new("https://api.internal/.well-known/jwks.json").is_ok());
    assert!(new("ftp://127.0.0.1/jwks.json").is_err());
    assert!(new("not a url").is_err());
    let e = BearerVerifier::new("https://api/jwks.json", "i", "a", Some(Path::new("/nope")))
        .map(|_| ())
        .unwrap_err();
    assert!(e.contains("/nope"), "{e}");
}

#[tokio::test]
async fn missing_and_malformed_tokens_are_401() {
    let v = BearerVerifier::new("http://127.0.0.1:9/jwks", "i", "a", None).expect("verifier");
    let bearer = |t: &str| http::HeaderValue::from_str(&format!("Bearer {t}")).unwrap();
    assert!(matches!(
        v.check(None, Scope::Reports).await,
        Err(AuthError::NoCredentials(_))
    ));
    assert!(matches!(
        v.check(Some(&bearer("x.y.z")), Scope::Reports).await,
        Err(AuthError::InvalidToken(_))
    ));
    // An HS256 token is refused before any key is fetched.
    let hs = "eyJhbGciOiJIUzI1NiJ9.eyJzY29wZSI6InJlcG9ydHMifQ.sig";
    assert!(matches!(
        v.check(Some(&bearer(hs)), Scope::Reports).await,
        Err(AuthError::InvalidToken(_))
    ));
}

/// The api's token keys, kept in memory.
#[derive(Default)]
struct Keys(std::sync::Mutex<Vec<rm_auth::StoredSigningKey>>);

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

impl rm_auth::AuthStore for Keys {
    type Error = Never;
    async fn api_key(&self, _: &str) -> Result<Option<rm_auth::ApiKey>, Never> {
        Ok(None)
    }
    async fn signing_keys(&self) -> Result<Vec<rm_auth::StoredSigningKey>, Never> {
        Ok(self.0.lock().unwrap().clone())
    }
    async fn replace_signing_key(&self, k: &rm_auth::StoredSigningKey) -> Result<(), Never> {
        self.0.lock().unwrap().retain(|x| x.kid != k.kid);
        self.0.lock().unwrap().push(k.clone());
        Ok(())
    }
    async fn add_signing_key(&self, k: &rm_auth::StoredSigningKey) -> Result<bool, Never> {
        self.0.lock().unwrap().push(k.clone());
        Ok(true)
    }
    async fn revocations(&self) -> Result<Vec<(String, i64)>, Never> {
        Ok(Vec::new())
    }
}

async fn api_tokens() -> rm_auth::Tokens {
    let ad_keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-jwks".to_vec()]);
    let seal = rm_auth::seal::SeedSeal::from_ad_keys(&ad_keys.expect("keys"));
    rm_auth::Tokens::load(&Keys::default(), &seal, "iss", "aud", 60)
        .await
        .expect("tokens")
}

/// An https server for `localhost` and 127.0.0.1 with a certificate made here:
/// answers `/.well-known/jwks.json` with `jwks` and the removed clients' list with
/// `{"revoked": []}` while `list_ok`, else 500. Its address and certificate (PEM).
async fn https_api(
    jwks: serde_json::Value,
    list_ok: Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    let pem = cert.cert.pem();
    let der = rustls_pki_types::CertificateDer::from(cert.cert.der().to_vec());
    let key =
        rustls_pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let jwks = jwks.to_string();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, jwks, list_ok) = (acceptor.clone(), jwks.clone(), Arc::clone(&list_ok));
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split(' ').nth(1).unwrap_or("");
                let (status, body) = match path {
                    "/.well-known/jwks.json" => ("200 OK", jwks),
                    "/.well-known/revoked-clients.json"
                        if list_ok.load(std::sync::atomic::Ordering::SeqCst) =>
                    {
                        ("200 OK", r#"{"revoked": []}"#.to_owned())
                    }
                    _ => ("500 Internal Server Error", "{}".to_owned()),
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (addr, pem)
}

/// The api's tokens, an https server publishing their key set (see [`https_api`]),
/// and a CA file vouching for its certificate: the tokens, the server's port, the
/// folder holding the CA file, and the CA file.
async fn trusted_api(
    list_ok: &Arc<std::sync::atomic::AtomicBool>,
) -> (rm_auth::Tokens, u16, tempfile::TempDir, std::path::PathBuf) {
    let tokens = api_tokens().await;
    let (addr, pem) = https_api(tokens.jwks(), Arc::clone(list_ok)).await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pem).expect("ca");
    (tokens, addr.port(), dir, ca)
}

fn bearer(t: &str) -> http::HeaderValue {
    http::HeaderValue::from_str(&format!("Bearer {t}")).expect("header")
}

/// Over https the key set is taken only from a server whose certificate the CA file
/// vouches for: a server on the path with a certificate of its own, serving a key set
/// of its own, verifies no token.
#[tokio::test]
async fn the_key_set_is_fetched_over_https_from_a_trusted_server_only() {
    let list_ok = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (tokens, port, dir, ca) = trusted_api(&list_ok).await;
    let url = format!("https://localhost:{port}/.well-known/jwks.json");
    let token = tokens
        .issue("c1", "acme", &[Scope::Reports])
        .expect("token");

    let trusted = BearerVerifier::new(&url, "iss", "aud", Some(&ca)).expect("verifier");
    let who = trusted
        .check(Some(&bearer(&token)), Scope::Reports)
        .await
        .expect("verified");
    assert_eq!(who, Viewer::Tenant("acme".into()));

    // The same server, its certificate not the one the CA file vouches for (the
    // operator's api is another): nothing is fetched, no token verifies.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let other_ca = dir.path().join("other.pem");
    std::fs::write(&other_ca, other.cert.pem()).expect("ca");
    let untrusted = BearerVerifier::new(&url, "iss", "aud", Some(&other_ca)).expect("verifier");
    let e = untrusted
        .check(Some(&bearer(&token)), Scope::Reports)
        .await
        .unwrap_err();
    assert!(matches!(e, AuthError::KeysUnavailable(_)), "{e}");
}

/// A list of removed clients that cannot be read is not an empty list: tokens are
/// refused (503) until it can be read again.
#[tokio::test]
async fn tokens_are_refused_while_the_removed_clients_cannot_be_read() {
    let list_ok = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tokens, port, _dir, ca) = trusted_api(&list_ok).await;
    let url = format!("https://127.0.0.1:{port}/.well-known/jwks.json");
    let token = tokens.issue("c1", "acme", &[Scope::Admin]).expect("token");
    let v = BearerVerifier::new(&url, "iss", "aud", Some(&ca)).expect("verifier");
    let e = v
        .check(Some(&bearer(&token)), Scope::Reports)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, AuthError::KeysUnavailable(m) if m.contains("removed clients")),
        "{e}"
    );
    // Readable again: at the next reread the token is let in.
    list_ok.store(true, std::sync::atomic::Ordering::SeqCst);
    v.revoked.lock().await.fetched = None;
    assert_eq!(
        v.check(Some(&bearer(&token)), Scope::Reports)
            .await
            .expect("verified"),
        Viewer::Operator
    );
}
