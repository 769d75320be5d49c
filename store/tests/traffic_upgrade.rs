//! A store written by the version before traffic classes and click windows (issue 15)
//! keeps working: its product and ad facts read as valid traffic without a receive
//! time, so every count stays what that version reported, except that a fact whose ad
//! id did not verify is now flagged (`invalidClicks.unverifiedAdId`) instead of being
//! counted. New facts written beside the old ones are classified and windowed.
//!
//! The fixture `fixtures/store-before-traffic-classes.redb` was written by the binary
//! of 701eff7 through its edge and aggregator (`fixtures/make-store-before-traffic-classes.sh`,
//! click window off so three clicks 1 ms apart were stored); the two JSON files beside
//! it are what that version's api answered for the ads and products reports.

use rm_store::embedded::EmbeddedStore;
use rm_store::model::ads::{AdAction, AdFact};
use rm_store::model::products::{ProductAction, ProductFact, ProductGroup};
use rm_store::model::status::AdIdStatus;
use rm_store::model::traffic::{ClickWindow, TrafficClass};
use rm_store::{BatchWrite, ReportFilter, ReportStore, WriteStore};
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/store-before-traffic-classes";

fn before(report: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{FIXTURE}.{report}.json")).expect("fixture");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["rows"].as_array().expect("rows").clone()
}

fn open_copy() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.redb");
    std::fs::copy(format!("{FIXTURE}.redb"), &path).expect("copy fixture");
    let store = EmbeddedStore::open(&path).expect("the old store opens");
    (dir, store)
}

#[tokio::test]
async fn a_store_of_the_previous_version_reports_what_it_did() {
    let (_dir, store) = open_copy();
    let all = ReportFilter::default();

    let ads = store.ads(&all).await.expect("ads");
    let old_ads = before("ads");
    assert_eq!(ads.len(), old_ads.len());
    for (new, old) in ads.iter().zip(&old_ads) {
        let new = serde_json::to_value(new).expect("json");
        for field in ["campaignId", "adId", "day", "impressions", "clicks", "ctr"] {
            assert_eq!(new[field], old[field], "{field} of {new}");
        }
        // Three clicks 1 ms apart stored without a receive time: not windowed.
        assert_eq!(new["clicks"], 3);
        assert_eq!(new["invalidClicks"]["clickWindow"], 0);
    }

    let products = store.products(&all).await.expect("products");
    let old_products = before("products");
    assert_eq!(products.len(), old_products.len());
    for (new, old) in products.iter().zip(&old_products) {
        let json = serde_json::to_value(new).expect("json");
        for field in ["campaignId", "adId", "productCode", "day", "impressions"] {
            assert_eq!(json[field], old[field], "{field} of {json}");
        }
        if new.ad_id_status == AdIdStatus::Verified {
            assert_eq!(json["clicks"], old["clicks"]);
            assert_eq!(json["ctr"], old["ctr"]);
            assert_eq!(new.invalid_clicks.total(), 0);
        } else {
            // The forged ad id's click: counted before, flagged now.
            assert_eq!(old["clicks"], 1);
            assert_eq!(new.clicks, 0);
            assert_eq!(new.invalid_clicks.unverified_ad_id, 1);
        }
    }
}

#[tokio::test]
async fn new_facts_beside_old_ones_are_classified_and_windowed() {
    let (_dir, store) = open_copy();
    let all = ReportFilter::default();
    let ads_before = store.ads(&all).await.expect("ads");
    let row = &ads_before[0];
    let t0 = 1_795_600_000_000; // 2026-11-25, a day of its own
    let day = rm_store::model::format_day(rm_store::model::day_of(t0));
    assert_eq!(day, "2026-11-25");
    let mut batch = BatchWrite::default();
    for i in 0..100u32 {
        batch.ad_facts.push(AdFact {
            campaign_id: row.campaign_id.clone(),
            ad_id: row.ad_id.clone(),
            action: AdAction::Click,
            dedup_key: 10_000 + u128::from(i),
            time_ms: t0 + i64::from(i),
            status: AdIdStatus::Verified,
            traffic: TrafficClass::Valid,
            shopper: 42,
            received_ms: t0 + 5 + i64::from(i),
        });
    }
    let group = ProductGroup {
        campaign_id: row.campaign_id.clone(),
        ad_id: row.ad_id.clone(),
        catalog_id: "demo-catalog".into(),
        product_code: "cola-1l".into(),
        day: rm_store::model::day_of(t0),
    };
    for (i, traffic) in [
        TrafficClass::Valid,
        TrafficClass::KnownBot,
        TrafficClass::Prefetch,
    ]
    .into_iter()
    .enumerate()
    {
        batch.product_facts.push(ProductFact {
            group: group.clone(),
            action: ProductAction::Impression,
            dedup_key: 20_000 + i as u128,
            status: AdIdStatus::Verified,
            time_ms: t0,
            traffic,
            shopper: i as u64,
            received_ms: t0,
        });
    }
    store.write(&batch).await.expect("write");
    // Written twice (a replay after a crash): nothing changes.
    store.write(&batch).await.expect("write again");

    let ads = store.ads(&all).await.expect("ads");
    assert_eq!(ads.len(), ads_before.len() + 1);
    let new_day = ads.iter().find(|r| r.day == *day).expect("new row");
    assert_eq!(new_day.clicks, 1, "100 clicks 1 ms apart are one click");
    assert_eq!(new_day.invalid_clicks.click_window, 99);
    for (a, b) in ads.iter().filter(|r| r.day != *day).zip(&ads_before) {
        assert_eq!(a, b, "old rows unchanged");
    }
    let off = ReportFilter {
        click_window: ClickWindow(0),
        ..ReportFilter::default()
    };
    let unwindowed = store.ads(&off).await.expect("ads");
    let new_day = unwindowed.iter().find(|r| r.day == *day).expect("new row");
    assert_eq!(new_day.clicks, 100, "window 0 turns it off");

    let products = store.products(&all).await.expect("products");
    let p = products
        .iter()
        .find(|r| r.day == *day)
        .expect("product row");
    assert_eq!(p.impressions, 1);
    assert_eq!(p.invalid_impressions.known_bot, 1);
    assert_eq!(p.invalid_impressions.prefetch, 1);
}
