//! Report stores for the store benchmarks (`spendbench`, `reportbench`): one store per
//! name, embedded under a directory or a ClickHouse database of its own, dropped when
//! the benchmark is done.

use rm_store::clickhouse::{ClickHouseConfig, ClickHouseStore};
use rm_store::embedded::EmbeddedStore;
use rm_store::AnyStore;

/// A store a benchmark filled, and where it lives.
pub struct BenchStore {
    /// The store.
    pub store: AnyStore,
    /// Its ClickHouse server and database, when it is one.
    clickhouse: Option<(String, String)>,
}

impl BenchStore {
    /// Opens store `name` of benchmark `bench`: a database `rm_<bench>_<name>_<pid>` on
    /// the ClickHouse server at `clickhouse_url`, else an embedded store under `dir`.
    pub async fn open(
        bench: &str,
        name: &str,
        clickhouse_url: Option<&str>,
        dir: &std::path::Path,
    ) -> anyhow::Result<Self> {
        Self::open_of(bench, name, clickhouse_url, dir, std::process::id()).await
    }

    /// [`Self::open`] for the run of process `pid`: its ClickHouse database, which a
    /// run kept (or left on a failure) is read again as it was.
    pub async fn open_of(
        bench: &str,
        name: &str,
        clickhouse_url: Option<&str>,
        dir: &std::path::Path,
        pid: u32,
    ) -> anyhow::Result<Self> {
        Ok(match clickhouse_url {
            Some(url) => {
                let database = format!("rm_{bench}_{name}_{pid}");
                let config = ClickHouseConfig {
                    url: Some(url.to_owned()),
                    database: database.clone(),
                    user: "default".into(),
                    password: String::new(),
                };
                Self {
                    store: AnyStore::ClickHouse(ClickHouseStore::connect(&config).await?),
                    clickhouse: Some((url.to_owned(), database)),
                }
            }
            None => Self {
                store: AnyStore::Embedded(EmbeddedStore::open(&EmbeddedStore::path(
                    &dir.join(name),
                ))?),
                clickhouse: None,
            },
        })
    }

    /// Merges every version of the rollups' tallies into one (`OPTIMIZE TABLE rollups
    /// FINAL`), as ClickHouse's background merges eventually do; nothing for an
    /// embedded store (it keeps one row per tally).
    pub async fn optimize_rollups(&self) -> anyhow::Result<()> {
        if let Some((url, db)) = &self.clickhouse {
            statement(url, &format!("OPTIMIZE TABLE {db}.rollups FINAL")).await?;
        }
        Ok(())
    }

    /// Drops the ClickHouse database (an embedded store goes with its directory).
    pub async fn drop_database(self) {
        if let Some((url, db)) = self.clickhouse {
            drop_clickhouse_database(&url, &db).await;
        }
    }
}

/// Drops a benchmark's ClickHouse database `db` on the server at `url`; a failure is
/// reported, not returned (the numbers are measured by then).
pub async fn drop_clickhouse_database(url: &str, db: &str) {
    if let Err(e) = statement(url, &format!("DROP DATABASE IF EXISTS {db}")).await {
        eprintln!("could not drop {db}: {e}");
    }
}

/// One statement over ClickHouse's HTTP interface.
async fn statement(url: &str, sql: &str) -> anyhow::Result<()> {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client: Client<_, Full<hyper::body::Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let req = http::Request::post(url).body(Full::new(hyper::body::Bytes::from(sql.to_owned())))?;
    let resp = client.request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "{status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(())
}

/// A log of a few partitions, as the benchmarks fill stores from it: each record goes
/// to the partition of its key (`EventRecord::partition_key`, as Kafka's producer
/// would place it) at that partition's next offset.
pub struct Partitions(Vec<i64>);

impl Partitions {
    /// `n` empty partitions (at least one).
    pub fn new(n: usize) -> Self {
        Self(vec![0; n.max(1)])
    }

    /// Folds `records` into `store` as a restarted aggregator does with one batch
    /// (touched entities and tallies loaded from the store, then the batch written),
    /// the records placed at their log positions.
    pub async fn fold_into(
        &mut self,
        store: &AnyStore,
        records: &[rm_schemas::EventRecord],
        policy: &rm_aggregator::batch::Policy,
    ) -> anyhow::Result<()> {
        use rm_aggregator::batch::{fold_at, Position};
        use rm_aggregator::pipeline::load_sets;
        use rm_store::WriteStore;
        let positions: Vec<Position> = records
            .iter()
            .map(|r| {
                let n = self.0.len() as u64;
                let p = (xxhash_rust::xxh3::xxh3_64(r.partition_key()) % n) as usize;
                self.0[p] += 1;
                (p as i32, self.0[p] - 1)
            })
            .collect();
        let mut sets = load_sets(store, records, &positions).await?;
        let (write, _) = fold_at(records, Some(&positions), &mut sets, policy);
        store.write(&write).await?;
        Ok(())
    }
}

/// The orders topic's partitions, as the api keys orders (by order id): its records
/// folded as the aggregator folds them ([`rm_aggregator::sales`]), each written
/// batch's orders offered their shoppers' stored touches, and the offers folded in
/// turn, as the pipeline's lookups after a write do.
impl Partitions {
    /// Folds `orders` into `store`, then the offers they make, until none is left.
    pub async fn fold_orders_into(
        &mut self,
        store: &AnyStore,
        orders: Vec<rm_aggregator::sales::OrderMsg>,
        w: &rm_store::model::attribution::Windows,
    ) -> anyhow::Result<()> {
        use rm_aggregator::sales::{self, Lookups, OrderIn, OrderMsg};
        use rm_store::{BatchWrite, WriteStore};
        let mut msgs = orders;
        while !msgs.is_empty() {
            let ins: Vec<OrderIn> = msgs
                .into_iter()
                .map(|msg| {
                    let id = msg.order_id();
                    let bare = rm_schemas::namespace::split(&id).1;
                    let n = self.0.len() as u64;
                    let p = (xxhash_rust::xxh3::xxh3_64(bare.as_bytes()) % n) as usize;
                    self.0[p] += 1;
                    OrderIn {
                        msg,
                        at: (p as i32, self.0[p] - 1),
                    }
                })
                .collect();
            let mut states = store.load_orders(&sales::order_ids(&ins)).await?;
            let mut places = sales::places(&ins, &states, w);
            places.extend(sales::progress_places(&ins));
            let mut tallies = store.load_tallies(&places).await?;
            let fold = sales::fold(&ins, &mut states, &mut tallies, w);
            store
                .write(&BatchWrite {
                    order_lines: fold.lines,
                    order_states: fold.states,
                    tallies: fold.tallies,
                    ..BatchWrite::default()
                })
                .await?;
            let lookups = Lookups {
                orders: fold.orders,
                touches: Vec::new(),
            };
            msgs = lookups
                .offers(store, w)
                .await?
                .into_iter()
                .map(OrderMsg::Offer)
                .collect();
        }
        Ok(())
    }
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
