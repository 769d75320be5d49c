//! The report routes' tests: sales ROAS, ads and campaign summaries in JSON and CSV,
//! CSV quoting, over an embedded store.

use super::*;
use rm_store::embedded::EmbeddedStore;
use rm_store::model::attribution::{shopper, OrderLine, ShopperId, Touch, TouchKind};
use rm_store::{BatchWrite, WriteStore};

const ORDER_AT: i64 = 1_795_000_000_000; // 2026-11-18

fn usd(s: &str) -> Money {
    Money::parse(s, money::DEFAULT_CURRENCY)
        .expect("money")
        .expect("amount")
}

fn dec(s: &str) -> Decimal {
    Decimal::from_str_exact(s).expect("decimal")
}

fn line(order: &str, product: &str, quantity: u64, revenue: &str) -> OrderLine {
    OrderLine {
        order_id: order.into(),
        line: 0,
        customer_id: "c1".into(),
        session_id: String::new(),
        time_ms: ORDER_AT,
        catalog_id: "cat".into(),
        product_code: product.into(),
        quantity,
        revenue: usd(revenue),
        ad_id: String::new(),
        order_ad_ids: Vec::new(),
    }
}

async fn body(r: Response) -> (StatusCode, String) {
    use http_body_util::BodyExt as _;
    let status = r.status();
    let bytes = r.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8(bytes.to_vec()).expect("utf-8"))
}

#[test]
fn roas_needs_a_positive_cost_and_a_campaign() {
    let r = |campaign: &str| SalesReportRow {
        campaign_id: campaign.into(),
        catalog_id: "cat".into(),
        product_code: "p".into(),
        day: "2026-11-18".into(),
        orders: 1,
        units: 1,
        revenue: dec("5.00"),
        currency: money::DEFAULT_CURRENCY,
        click_attributions: 1,
        view_attributions: 0,
    };
    let costs = |c: &str| match c {
        "paid" => Some(usd("$2")),
        "free" => Some(usd("$0")),
        "euro" => Some(usd("EUR 2")),
        _ => Some(usd("$1")),
    };
    assert_eq!(SalesRow::new(r("paid"), &costs).roas, Some(dec("2.5")));
    assert_eq!(
        SalesRow::new(r("euro"), &costs).roas,
        None,
        "revenue in USD over a cost in EUR"
    );
    assert_eq!(
        SalesRow::new(r("free"), &costs).roas,
        None,
        "no division by 0"
    );
    assert_eq!(SalesRow::new(r(""), &costs).roas, None, "unattributed");
    assert_eq!(SalesRow::new(r("paid"), &NoCosts).roas, None);
}

#[tokio::test]
async fn sales_rows_carry_roas_where_the_cost_is_known() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let write = BatchWrite {
        touches: vec![Touch {
            shopper: shopper(ShopperId::Customer, "c1"),
            dedup_key: 1,
            kind: TouchKind::ProductClick,
            ad_id: "rm1.camp-1.ad".into(),
            campaign_id: "camp-1".into(),
            catalog_id: "cat".into(),
            product_code: "p1".into(),
            time_ms: ORDER_AT - 3_600_000,
        }],
        order_lines: vec![line("o1", "p1", 2, "30.0"), line("o2", "p2", 1, "5.5")],
        ..BatchWrite::default()
    };
    store.write(&write).await.expect("write");
    // As the aggregator leaves a store: its facts counted into the rollups.
    store
        .rebuild_tallies(
            rm_store::model::traffic::ClickWindow::default(),
            &Windows::default(),
        )
        .await
        .expect("count the facts");
    let costs = |c: &str| (c == "camp-1").then(|| usd("$10"));
    let w = Windows::default();
    let h = HeaderMap::new();
    let (status, json) =
        body(answer_with(&store, &costs, &w, ReportKind::Sales, "", &h).await).await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        v,
        serde_json::json!({"rows": [
            {"campaignId": "", "catalogId": "cat", "productCode": "p2", "day": "2026-11-18",
             "orders": 1, "units": 1, "revenue": "5.50", "currency": "USD", "clickAttributions": 0, "viewAttributions": 0, "roas": null},
            {"campaignId": "camp-1", "catalogId": "cat", "productCode": "p1", "day": "2026-11-18",
             "orders": 1, "units": 2, "revenue": "30.00", "currency": "USD", "clickAttributions": 1, "viewAttributions": 0, "roas": 3.0},
        ]})
    );
    let (_, csv) = body(
        answer_with(
            &store,
            &costs,
            &w,
            ReportKind::Sales,
            "campaignId=camp-1&format=csv",
            &h,
        )
        .await,
    )
    .await;
    assert_eq!(
        csv,
        "campaignId,catalogId,productCode,day,orders,units,revenue,currency,clickAttributions,viewAttributions,roas\r\n\
         camp-1,cat,p1,2026-11-18,1,2,30.00,USD,1,0,3.0\r\n"
    );
    let (_, none) = body(answer(&store, ReportKind::Sales, "from=2026-11-19", &h).await).await;
    assert_eq!(none, r#"{"rows":[]}"#);
    let (status, _) = body(answer(&store, ReportKind::Sales, "from=yesterday", &h).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn ads_and_campaigns_answer_json_and_csv() {
    use rm_store::model::ads::{AdAction, AdFact};
    use rm_store::model::status::AdIdStatus;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let copy = |action, key, hours: i64, status| AdFact {
        campaign_id: "camp-1".into(),
        ad_id: "rm1.camp-1.ad".into(),
        action,
        dedup_key: key,
        time_ms: ORDER_AT + hours * 3_600_000,
        status,
        traffic: Default::default(),
        shopper: 0,
        received_ms: 0,
    };
    let write = BatchWrite {
        ad_facts: vec![
            copy(AdAction::Impression, 1, 0, AdIdStatus::Verified),
            // The same impression re-fired the next day after expiry: nothing new.
            copy(AdAction::Impression, 1, 24, AdIdStatus::Expired),
            copy(AdAction::Impression, 2, 1, AdIdStatus::Verified),
            copy(AdAction::Impression, 3, 1, AdIdStatus::BadSignature),
            copy(AdAction::Click, 4, 2, AdIdStatus::Verified),
        ],
        ..BatchWrite::default()
    };
    store.write(&write).await.expect("write");
    // As the aggregator leaves a store: its facts counted into the rollups.
    store
        .rebuild_tallies(
            rm_store::model::traffic::ClickWindow::default(),
            &Windows::default(),
        )
        .await
        .expect("count the facts");
    let h = HeaderMap::new();
    let (status, json) = body(answer(&store, ReportKind::Ads, "", &h).await).await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        v,
        serde_json::json!({"rows": [
            {"campaignId": "camp-1", "creativeId": "", "adId": "", "day": "2026-11-18",
             "periodStart": "2026-11-18T00:00:00Z",
             "impressions": 2, "clicks": 1, "ctr": 0.5, "notBillableImpressions": 1,
             "notBillableClicks": 0, "adIdStatus": "bad_signature",
             "invalidImpressions": {"knownBot": 0, "nonBrowser": 0, "prefetch": 0, "unverifiedAdId": 1,
                                    "beforeServe": 0, "productNotInAd": 0, "servedAdRepeat": 0, "clickWindow": 0},
             "invalidClicks": {"knownBot": 0, "nonBrowser": 0, "prefetch": 0, "unverifiedAdId": 0,
                               "beforeServe": 0, "productNotInAd": 0, "servedAdRepeat": 0, "clickWindow": 0}},
        ]})
    );
    let costs = KnownCosts {
        max_bid: [("camp-1".to_owned(), usd("$0.5"))].into(),
        ..KnownCosts::default()
    };
    let w = Windows::default();
    let (status, csv) =
        body(answer_with(&store, &costs, &w, ReportKind::Campaigns, "format=csv", &h).await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        csv,
        "campaignId,day,periodStart,impressions,clicks,ctr,notBillableImpressions,\
         notBillableClicks,videoPlays,invalidVideoPlays,completionRate,productImpressions,\
         productClicks,cartsAdded,invalidCartsAdded,attributedOrders,revenue,currency,spend,\
         roas\r\n\
         camp-1,2026-11-18,2026-11-18T00:00:00Z,2,1,0.5,1,0,0,0,0.0,0,0,0,0,0,0.00,USD,0.50,\
         0.0\r\n"
    );
    let (_, unknown_bid) =
        body(answer(&store, ReportKind::Campaigns, "campaignId=camp-1", &h).await).await;
    let v: serde_json::Value = serde_json::from_str(&unknown_bid).expect("json");
    assert_eq!(v["rows"][0]["spend"], serde_json::Value::Null);
    assert_eq!(v["rows"][0]["roas"], serde_json::Value::Null);
    for q in ["adId=x", "catalogId=c"] {
        let (status, err) = body(answer(&store, ReportKind::Campaigns, q, &h).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{q}");
        let field = q.split('=').next().unwrap_or_default();
        assert!(err.contains(&format!("\"field\":\"{field}\"")), "{err}");
    }
}

/// An order of three lines at 19.99 reports 59.97 exactly; a line in EUR of the same
/// product is a row of its own in the sales report and in the campaign summary, never
/// added to the USD revenue, and has no ROAS against the campaign's USD cost.
#[tokio::test]
async fn money_is_exact_and_two_currencies_never_add() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&EmbeddedStore::path(dir.path())).expect("open");
    let mut lines: Vec<OrderLine> = (0..3)
        .map(|i| OrderLine {
            line: i,
            ..line("o1", "p1", 1, "19.99")
        })
        .collect();
    lines.push(OrderLine {
        revenue: usd("EUR 5"),
        ..line("o2", "p1", 1, "0")
    });
    let write = BatchWrite {
        touches: vec![Touch {
            shopper: shopper(ShopperId::Customer, "c1"),
            dedup_key: 1,
            kind: TouchKind::ProductClick,
            ad_id: "rm1.camp-1.ad".into(),
            campaign_id: "camp-1".into(),
            catalog_id: "cat".into(),
            product_code: "p1".into(),
            time_ms: ORDER_AT - 3_600_000,
        }],
        order_lines: lines,
        ..BatchWrite::default()
    };
    store.write(&write).await.expect("write");
    // As the aggregator leaves a store: its facts counted into the rollups.
    store
        .rebuild_tallies(
            rm_store::model::traffic::ClickWindow::default(),
            &Windows::default(),
        )
        .await
        .expect("count the facts");
    let costs = KnownCosts {
        cost: [("camp-1".to_owned(), usd("$10"))].into(),
        max_bid: [("camp-1".to_owned(), usd("$0.10"))].into(),
    };
    let (w, h) = (Windows::default(), HeaderMap::new());
    let (_, json) = body(answer_with(&store, &costs, &w, ReportKind::Sales, "", &h).await).await;
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let rows: Vec<(&str, &str, &serde_json::Value)> = v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["revenue"].as_str().expect("a string"),
                r["currency"].as_str().expect("a code"),
                &r["roas"],
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("5.00", "EUR", &serde_json::Value::Null),
            ("59.97", "USD", &serde_json::json!(5.997)),
        ]
    );
    let (_, json) =
        body(answer_with(&store, &costs, &w, ReportKind::Campaigns, "", &h).await).await;
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(
        (
            &rows[0]["currency"],
            &rows[0]["revenue"],
            &rows[0]["attributedOrders"]
        ),
        (
            &serde_json::json!("USD"),
            &serde_json::json!("59.97"),
            &serde_json::json!(1)
        )
    );
    assert_eq!(
        (
            &rows[1]["currency"],
            &rows[1]["revenue"],
            &rows[1]["spend"],
            &rows[1]["roas"]
        ),
        (
            &serde_json::json!("EUR"),
            &serde_json::json!("5.00"),
            &serde_json::Value::Null,
            &serde_json::Value::Null
        )
    );
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    product_code: String,
    ctr: f64,
    value: Option<f64>,
}

#[test]
fn csv_quotes_and_keeps_field_order() {
    let rows = vec![
        Row {
            product_code: "a,b".into(),
            ctr: 0.5,
            value: None,
        },
        Row {
            product_code: "q\"x".into(),
            ctr: 0.0,
            value: Some(1.25),
        },
    ];
    let csv = to_csv(&rows);
    assert_eq!(
        csv,
        "productCode,ctr,value\r\n\"a,b\",0.5,\r\n\"q\"\"x\",0.0,1.25\r\n"
    );
    assert_eq!(to_csv::<Row>(&[]), "");
}

/// A carts download without a page size, read a page at a time.
mod cart_downloads {
    use super::*;
    use rm_store::model::ads::AdReportRow;
    use rm_store::model::attribution::SalesReportRow;
    use rm_store::model::campaigns::{CampaignSalesRow, CartAddsRow};
    use rm_store::model::carts::lines::CartLine;
    use rm_store::model::carts::{self, CartCampaignRow, CartFact, CartKey};
    use rm_store::model::funnel::FunnelReportRow;
    use rm_store::model::products::ProductReportRow;
    use rm_store::model::status::AdIdStatus;
    use rm_store::model::tallies::{SummedTally, TallyQuery};
    use rm_store::{Backend, StoreError};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// An embedded store whose carts reads fail from the `fail_from`-th on (a store
    /// going away halfway through a download).
    #[derive(Clone)]
    struct Failing {
        inner: EmbeddedStore,
        reads: Arc<AtomicUsize>,
        fail_from: usize,
    }

    impl Backend for Failing {
        fn backend(&self) -> &'static str {
            "failing"
        }
        fn readiness(&self) -> Result<(), String> {
            Ok(())
        }
    }

    impl ReportStore for Failing {
        async fn funnel(&self, f: &ReportFilter) -> Result<Vec<FunnelReportRow>, StoreError> {
            self.inner.funnel(f).await
        }
        async fn products(&self, f: &ReportFilter) -> Result<Vec<ProductReportRow>, StoreError> {
            self.inner.products(f).await
        }
        async fn cart_lines(
            &self,
            f: &ReportFilter,
            from: Option<&LinePlace>,
            limit: usize,
        ) -> Result<Vec<CartLine>, StoreError> {
            if self.reads.fetch_add(1, Ordering::SeqCst) + 1 >= self.fail_from {
                return Err(StoreError::Unavailable("the store went away".into()));
            }
            self.inner.cart_lines(f, from, limit).await
        }
        async fn cart_campaigns(
            &self,
            f: &ReportFilter,
        ) -> Result<Vec<CartCampaignRow>, StoreError> {
            self.inner.cart_campaigns(f).await
        }
        async fn ads(&self, f: &ReportFilter) -> Result<Vec<AdReportRow>, StoreError> {
            self.inner.ads(f).await
        }
        async fn cart_adds(&self, f: &ReportFilter) -> Result<Vec<CartAddsRow>, StoreError> {
            self.inner.cart_adds(f).await
        }
        async fn campaign_sales(
            &self,
            f: &ReportFilter,
            w: &Windows,
        ) -> Result<Vec<CampaignSalesRow>, StoreError> {
            self.inner.campaign_sales(f, w).await
        }
        async fn tallies(&self, q: &TallyQuery) -> Result<Option<Vec<SummedTally>>, StoreError> {
            self.inner.tallies(q).await
        }
        async fn sales(
            &self,
            f: &ReportFilter,
            w: &Windows,
        ) -> Result<Vec<SalesReportRow>, StoreError> {
            self.inner.sales(f, w).await
        }
    }

    /// A store of `n` cart lines, one per shopper.
    async fn store_of(dir: &std::path::Path, n: usize) -> EmbeddedStore {
        let store = EmbeddedStore::open(&EmbeddedStore::path(dir)).expect("open");
        let mut cart_rows = Vec::new();
        for i in 0..n {
            let key = CartKey {
                tracking_id: format!("s{i:06}"),
                catalog_id: "cat".into(),
                product_code: "p".into(),
            };
            let fact = CartFact {
                dedup_key: i as u128,
                time_ms: ORDER_AT,
                units: 1,
                value: Some(2.5),
                campaign_id: "camp".into(),
                ad_id: "rm1.camp.x".into(),
                status: AdIdStatus::Verified,
            };
            cart_rows.extend(carts::derive_cart(&key, &[fact]));
        }
        let w = BatchWrite {
            cart_rows,
            ..BatchWrite::default()
        };
        store.write(&w).await.expect("write");
        store
    }

    #[tokio::test]
    async fn a_download_is_every_line_once_read_a_page_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = 2 * CART_LINES_PER_READ + 7;
        let store = Failing {
            inner: store_of(dir.path(), n).await,
            reads: Arc::default(),
            fail_from: usize::MAX,
        };
        let h = HeaderMap::new();
        let (status, text) = body(answer(&store, ReportKind::Carts, "format=csv", &h).await).await;
        assert_eq!(status, StatusCode::OK);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), n + 1, "a header and every line");
        assert!(lines[0].starts_with("trackingId,"), "{}", lines[0]);
        let ids: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l.split(',').next().expect("id"))
            .collect();
        let want: Vec<String> = (0..n).map(|i| format!("s{i:06}")).collect();
        assert_eq!(ids, want, "in order, once each");
        assert_eq!(
            store.reads.load(Ordering::SeqCst),
            3,
            "three reads of a page"
        );
    }

    #[tokio::test]
    async fn a_download_holds_its_admission_place_until_it_ends() {
        use http_body_util::BodyExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store_of(dir.path(), CART_LINES_PER_READ + 1).await;
        let places = admission::Admission::new(1, 1);
        let place = places.enter("ns").await.expect("a place");
        let today = rm_store::model::day_of(chrono::Utc::now().timestamp_millis());
        let q =
            query::parse(ReportKind::Carts, "format=csv", &HeaderMap::new(), today).expect("query");
        let w = Windows::default();
        let r = rows(
            &store,
            &NoCosts,
            &w,
            (None, Some(place)),
            ReportKind::Carts,
            q,
        )
        .await
        .expect("an answer");
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(200), places.enter("other"))
                .await;
        assert!(waiting.is_err(), "the download still reads the store");
        let text = r.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(text.split(|b| *b == b'\n').count(), CART_LINES_PER_READ + 3);
        let after =
            tokio::time::timeout(std::time::Duration::from_secs(5), places.enter("other")).await;
        assert!(
            matches!(after, Ok(Ok(_))),
            "the place is given back at its end"
        );
    }

    #[tokio::test]
    async fn a_store_failing_halfway_cuts_the_download() {
        use http_body_util::BodyExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = store_of(dir.path(), CART_LINES_PER_READ + 1).await;
        let h = HeaderMap::new();
        // At once: an error answer.
        let at_once = Failing {
            inner: inner.clone(),
            reads: Arc::default(),
            fail_from: 1,
        };
        let r = answer(&at_once, ReportKind::Carts, "format=csv", &h).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        // Halfway: the body fails, never a shorter file that looks whole.
        let halfway = Failing {
            inner,
            reads: Arc::default(),
            fail_from: 2,
        };
        let r = answer(&halfway, ReportKind::Carts, "format=csv", &h).await;
        assert_eq!(r.status(), StatusCode::OK);
        let e = r.into_body().collect().await.expect_err("a cut download");
        assert!(e.to_string().contains("the store went away"), "{e}");
    }
}
