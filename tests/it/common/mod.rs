//! Test harness: runs the real `retail-media` binary on free ports with a fresh data
//! directory, speaks raw HTTP/1.1 to it (so tests can send bytes a client library
//! would refuse), and finds the real servers tests need through `RM_*` settings.
#![allow(dead_code, clippy::unwrap_used, missing_docs)]

pub mod cluster;
pub mod exact;
pub mod servers;
pub mod sessions;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound then released), below Linux's ephemeral range
/// (32768-60999), so no outgoing connection of the tests can take it between its
/// release and the service's bind; a port another test took meanwhile is caught by
/// [`Service::start_with_args`], which starts again on other ports.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 20);
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mix =
            (seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let port = 20_000 + (mix >> 33) as u16 % 12_000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An HTTP response, read whole.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// The `User-Agent` of [`request_raw`] and [`get`]: a shopper's browser, so the
/// beacons tests fire are valid traffic (the edge flags a request without an agent as
/// `non_browser`). Tests of other agents send their own with [`send`], which adds none.
pub const BROWSER: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
    (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

/// Sends raw request-target bytes with `method` and reads the response (one request per
/// connection), as a browser ([`BROWSER`]).
pub fn request_raw(addr: SocketAddr, method: &str, target: &[u8]) -> std::io::Result<HttpResponse> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    let mut req = Vec::new();
    req.extend_from_slice(method.as_bytes());
    req.push(b' ');
    req.extend_from_slice(target);
    req.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\nUser-Agent: ");
    req.extend_from_slice(BROWSER.as_bytes());
    req.extend_from_slice(b"\r\n\r\n");
    s.write_all(&req)?;
    let mut data = Vec::new();
    s.read_to_end(&mut data)?;
    parse_response(&data)
}

/// Sends a request with headers and a body (`Content-Length` is added) and reads the
/// response (one request per connection).
pub fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes)?;
    let mut data = Vec::new();
    s.read_to_end(&mut data)?;
    parse_response(&data)
}

/// An access token from the api's token endpoint (client credentials).
pub fn token(api: SocketAddr, client_id: &str, secret: &str, scope: Option<&str>) -> String {
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{client_id}:{secret}"));
    let body = match scope {
        Some(s) => format!("grant_type=client_credentials&scope={}", enc(s)),
        None => "grant_type=client_credentials".to_owned(),
    };
    let r = send(
        api,
        "POST",
        "/v1/oauth2/token",
        &[
            ("Authorization", &format!("Basic {basic}")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "token: {}", String::from_utf8_lossy(&r.body));
    r.json()["access_token"].as_str().unwrap().to_owned()
}

/// The quick start's operator token (`demo-operator`, scope `admin`): every
/// operation, every namespace (tests of one namespace's view use their own clients).
pub fn demo_token(api: SocketAddr) -> String {
    token(api, "demo-operator", "demo-operator-secret", None)
}

/// Creates client `id` of namespace `ns` with scope `reports` through the admin API
/// (with the quick start's operator); its secret.
pub fn namespace_client(api: SocketAddr, id: &str, ns: &str) -> String {
    let operator = format!("Bearer {}", demo_token(api));
    let body = serde_json::json!({"clientId": id, "namespaceId": ns, "scopes": ["reports"]});
    let r = send(
        api,
        "POST",
        "/v1/admin/clients",
        &[
            ("Authorization", &operator),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    r.json()["clientSecret"].as_str().unwrap().to_owned()
}

/// Posts `body` (`{"orders": [...]}`) to the api's `/v1/orders` with the quick start's
/// orders key (namespace `demo`); panics unless it answers 200; returns its answer.
pub fn post_orders(api: SocketAddr, body: &serde_json::Value) -> serde_json::Value {
    let r = send(
        api,
        "POST",
        "/v1/orders",
        &[
            ("Authorization", "Basic demo-orders-key"),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(body).unwrap(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// A `GET` of the api read with `auth` (an `Authorization` value), as JSON; panics
/// unless it answers 200.
pub fn api_json(api: SocketAddr, auth: &str, path: &str) -> serde_json::Value {
    let r = send(api, "GET", path, &[("Authorization", auth)], b"").unwrap();
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// The `rows` of a report read with `auth` (an `Authorization` value); panics unless
/// it answers 200.
pub fn report_rows(api: SocketAddr, auth: &str, path: &str) -> Vec<serde_json::Value> {
    api_json(api, auth, path)["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn parse_response(data: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let end = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let head = std::str::from_utf8(&data[..end]).map_err(|_| bad("head not utf8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or_else(|| bad("no status line"))?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    let headers = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect::<Vec<(String, String)>>();
    let raw = &data[end + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(raw).ok_or_else(|| bad("bad chunked body"))?
    } else {
        raw.to_vec()
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// The data of a `Transfer-Encoding: chunked` body.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// `GET` of a path (with query) that is already well-formed.
pub fn get(addr: SocketAddr, path_and_query: &str) -> std::io::Result<HttpResponse> {
    request_raw(addr, "GET", path_and_query.as_bytes())
}

/// Percent-encodes a value for a query string (RFC 3986 unreserved kept).
pub fn enc(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Builds a beacon path from parameters.
pub fn beacon(params: &[(&str, &str)]) -> String {
    let q: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    format!("/v1/events/ad/interaction?{}", q.join("&"))
}

/// A running `retail-media` process.
pub struct Service {
    pub child: Child,
    pub ingest: SocketAddr,
    pub api: SocketAddr,
    pub aggregator: SocketAddr,
    pub data_dir: PathBuf,
    log_path: PathBuf,
}

impl Service {
    /// Starts `retail-media <sub>` with `data_dir` and extra environment.
    pub fn start(sub: &str, data_dir: &Path, env: &[(&str, String)]) -> Service {
        Self::start_with_args(sub, data_dir, env, &[], None)
    }

    /// Like [`Service::start`], with extra command-line arguments; `edge_port` is where
    /// the edge will listen when the arguments or a settings file decide it.
    pub fn start_with_args(
        sub: &str,
        data_dir: &Path,
        env: &[(&str, String)],
        args: &[&str],
        edge_port: Option<u16>,
    ) -> Service {
        // A port taken between `free_port` and the bind: start again on other ports.
        for _ in 0..2 {
            let mut s = Self::spawn(sub, data_dir, env, args, edge_port);
            if s.ready_or_exited(s.ingest_or_api(sub), Duration::from_secs(60))
                || !s.log().contains("Address already in use")
            {
                s.wait_ready(s.ingest_or_api(sub), Duration::from_secs(1));
                return s;
            }
        }
        let s = Self::spawn(sub, data_dir, env, args, edge_port);
        s.wait_ready(s.ingest_or_api(sub), Duration::from_secs(60));
        s
    }

    fn spawn(
        sub: &str,
        data_dir: &Path,
        env: &[(&str, String)],
        args: &[&str],
        edge_port: Option<u16>,
    ) -> Service {
        let (ingest, api, aggregator) = (free_port(), free_port(), free_port());
        let log_path = data_dir.join(format!("service-{ingest}.log"));
        std::fs::create_dir_all(data_dir).unwrap();
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_retail-media"));
        cmd.arg(sub)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RM_DATA_DIR", data_dir);
        if edge_port.is_none() {
            cmd.env("RM_INGEST_ADDR", format!("127.0.0.1:{ingest}"));
        }
        let ingest = edge_port.unwrap_or(ingest);
        cmd.env("RM_API_ADDR", format!("127.0.0.1:{api}"))
            .env("RM_AGGREGATOR_ADDR", format!("127.0.0.1:{aggregator}"))
            .env("RM_LOG", "info")
            // Tests use the demo clients; `retail-media api` loads them only when asked.
            .env("RM_API_DEMO", "true")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn retail-media");
        Service {
            child,
            ingest: ([127, 0, 0, 1], ingest).into(),
            api: ([127, 0, 0, 1], api).into(),
            aggregator: ([127, 0, 0, 1], aggregator).into(),
            data_dir: data_dir.to_path_buf(),
            log_path,
        }
    }

    /// Waits until `/readyz` answers 200 on `addr` (true) or the process exits (false).
    fn ready_or_exited(&mut self, addr: SocketAddr, within: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < within {
            if let Ok(r) = get(addr, "/readyz") {
                if r.status == 200 {
                    return true;
                }
            }
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn ingest_or_api(&self, sub: &str) -> SocketAddr {
        match sub {
            "api" => self.api,
            "aggregate" => self.aggregator,
            _ => self.ingest,
        }
    }

    /// Waits until `/readyz` answers 200 on `addr`.
    pub fn wait_ready(&self, addr: SocketAddr, within: Duration) {
        let t = Instant::now();
        while t.elapsed() < within {
            if let Ok(r) = get(addr, "/readyz") {
                if r.status == 200 {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "service on {addr} not ready within {within:?}; log:\n{}",
            self.log()
        );
    }

    /// The process's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// SIGKILL.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for a clean exit; returns the exit status code.
    pub fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        None
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server a test needs, from its `RM_*` setting. Absent: the test is skipped with a
/// message, unless `RM_REQUIRE_SERVICES=1` (as in CI), where absence fails the test.
/// Holding one, the test shares the servers with the others until it ends
/// ([`servers::shared`]).
pub fn required_setting(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => {
            servers::shared();
            Some(v)
        }
        _ => {
            if std::env::var("RM_REQUIRE_SERVICES").as_deref() == Ok("1") {
                panic!("{var} is not set but RM_REQUIRE_SERVICES=1: {what} must be running (deploy/local/up.sh starts it)");
            }
            eprintln!(
                "SKIPPED: {var} is not set; start {what} with deploy/local/up.sh to run this test"
            );
            None
        }
    }
}

/// Reads every raw value of `topic` from the embedded log under `data_dir` (the
/// process that wrote it must have exited).
pub fn read_embedded_raw(data_dir: &Path, topic: &str) -> Vec<Vec<u8>> {
    open_log(data_dir)
        .read(topic, 0, usize::MAX)
        .expect("read")
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

/// Opens the embedded log, waiting briefly for a previous handle's writer thread in
/// this process to release the file.
fn open_log(data_dir: &Path) -> rm_eventlog::embedded::EmbeddedLog {
    let path = rm_eventlog::EmbeddedLogConfig::path(data_dir);
    let t = Instant::now();
    loop {
        match rm_eventlog::embedded::EmbeddedLog::open(
            &path,
            &rm_eventlog::EmbeddedLogConfig::default(),
        ) {
            Ok(log) => return log,
            Err(e) if t.elapsed() > Duration::from_secs(5) => panic!("open embedded log: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads every record of `topic` from the embedded log under `data_dir` (the process
/// that wrote it must have exited).
pub fn read_embedded(data_dir: &Path, topic: &str) -> Vec<rm_schemas::EventRecord> {
    read_embedded_raw(data_dir, topic)
        .iter()
        .map(|v| rm_schemas::EventRecord::from_bytes(v).expect("record"))
        .collect()
}

/// Drops the test's ClickHouse database at the end, pass or fail.
pub struct DropDatabase(pub String, pub String);

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let _ = Command::new("curl")
            .args([
                "-sf",
                &self.0,
                "--data-binary",
                &format!("DROP DATABASE IF EXISTS {}", self.1),
            ])
            .status();
    }
}

/// The settings of a pipeline on the real broker and store, with a fresh topic and a
/// fresh ClickHouse database (dropped when the returned guard is), or `None` (the test
/// skips) when the servers are not configured.
pub fn kafka_clickhouse_env(
    name: &str,
    partitions: u32,
) -> Option<(Vec<(&'static str, String)>, DropDatabase)> {
    let brokers = required_setting("RM_KAFKA_BROKERS", "the Kafka cluster")?;
    let ch = required_setting("RM_CLICKHOUSE_URL", "a ClickHouse server")?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let topic = format!("test-{name}-{}-{nanos}", std::process::id());
    let database = format!("rm_{name}_{}_{}", std::process::id(), nanos % 1_000_000_000);
    let guard = DropDatabase(ch.clone(), database.clone());
    let env = vec![
        ("RM_KAFKA_BROKERS", brokers),
        ("RM_KAFKA_PARTITIONS", partitions.to_string()),
        ("RM_INGEST_TOPIC", topic.clone()),
        ("RM_INGEST_REJECTED_TOPIC_NAME", format!("{topic}-rejected")),
        ("RM_AGGREGATOR_TOPIC", topic.clone()),
        ("RM_AGGREGATOR_GROUP", format!("{topic}-group")),
        ("RM_CLICKHOUSE_URL", ch),
        ("RM_CLICKHOUSE_DATABASE", database),
    ];
    Some((env, guard))
}
