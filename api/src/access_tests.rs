//! The served api enforces each row's access rule before its handler: every row of
//! the route table is requested without credentials, with a token lacking its scope,
//! and with one holding it, over HTTP against `run` on an embedded store and state.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use rm_store::embedded::EmbeddedStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::routes::Access;
use crate::state::State;
use crate::{run, ApiConfig, ApiDeps};
use rm_auth::client::Scope;
use rm_auth::Tokens;

fn config() -> ApiConfig {
    ApiConfig {
        addr: ([127, 0, 0, 1], 0).into(),
        token_ttl_secs: 60,
        token_issuer: "iss".into(),
        token_audience: "aud".into(),
        limits: Default::default(),
        max_body_bytes: 1 << 16,
        demo: false,
        beacon_base_url: "http://127.0.0.1:1".into(),
        ad_ttl_secs: 60,
        ads_refresh_secs: 60,
        reports_concurrent: 4,
        reports_per_namespace: 2,
        clients_file: None,
        database_url: None,
        erasure_wait_secs: 0,
    }
}

/// Status and `WWW-Authenticate` of one request.
async fn call(
    addr: std::net::SocketAddr,
    method: &Method,
    path: &str,
    auth: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{auth}Content-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut data = Vec::new();
    s.read_to_end(&mut data).await.expect("read");
    let text = String::from_utf8_lossy(&data);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    let challenge = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    (status, challenge)
}

#[tokio::test]
async fn every_row_is_served_behind_its_access_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = Arc::new(State::open_embedded(dir.path()).expect("state"));
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("store");
    let ad_keys = rm_schemas::ad_id::AdIdKeys::new(vec![vec![7; 32]]).expect("keys");
    let seal = rm_auth::seal::SeedSeal::from_ad_keys(&ad_keys);
    let tokens = Tokens::load(&*state, &seal, "iss", "aud", 60)
        .await
        .expect("keys");
    let bearer = |scope: Scope| {
        let t = tokens.issue("c", "acme", &[scope]).expect("token");
        format!("Authorization: Bearer {t}\r\n")
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let deps = ApiDeps {
        store: Arc::new(rm_store::AnyStore::Embedded(store)),
        state,
        log: None,
        ad_keys,
        windows: Default::default(),
        inspector: None,
        inspector_forget: None,
    };
    let stop = CancellationToken::new();
    let server = tokio::spawn(run(
        config(),
        deps,
        listener,
        stop.clone(),
        rm_service::serve::ServeOptions {
            drain_deadline: Duration::from_secs(1),
            ..Default::default()
        },
    ));
    for r in crate::endpoints::table() {
        let path = r.path.replace("{segment.id}", "x").replace("{id}", "x");
        let at = format!("{} {}", r.method, r.path);
        let (status, challenge) = call(addr, &r.method, &path, "").await;
        match r.access {
            Access::Public => assert_eq!(status, 200, "{at}"),
            Access::ClientBasic => assert_eq!(status, 400, "{at}: the form is checked first"),
            Access::ApiKey => {
                assert_eq!(status, 401, "{at}");
                assert_eq!(challenge, "Basic realm=\"retail-media-orders\"", "{at}");
            }
            Access::Bearer(scopes) => {
                assert_eq!(
                    (status, challenge.as_str()),
                    (401, "Bearer realm=\"retail-media\""),
                    "{at}"
                );
                let other = Scope::ALL
                    .into_iter()
                    .find(|s| *s != Scope::Admin && !scopes.contains(s))
                    .expect("a scope the row does not accept");
                let (status, challenge) = call(addr, &r.method, &path, &bearer(other)).await;
                assert_eq!(status, 403, "{at} with {other:?}");
                assert!(
                    challenge.contains("insufficient_scope"),
                    "{at}: {challenge}"
                );
                let (status, _) = call(addr, &r.method, &path, &bearer(scopes[0])).await;
                assert!(![401, 403, 405].contains(&status), "{at}: {status}");
            }
        }
    }
    stop.cancel();
    server.await.expect("join").expect("run");
}
