//! Conversions of the api's state at start, one per format version, recorded under
//! `meta/format` so each runs once (and again harmlessly if two instances start
//! together: every step is idempotent).
//!
//! **Version 1: namespaces.** Everything written before namespaces belongs to the
//! namespace `default` (`rm_schemas::namespace::DEFAULT`):
//!
//! - clients and order API keys get `namespace: default`, and keys their `key_id`
//!   (their name, which `retail-media keys remove` already used);
//! - segments and products get `namespaceId: default`; product keys stay as they
//!   were, since scoped ids of `default` are the bare ids;
//! - campaigns get `namespaceId: default` whatever it said: before namespaces it was
//!   a free label, now it decides who sees the campaign, and every old client is in
//!   `default`. (Move a campaign to a tenant by recreating it there.)
//! - order ids taken keep their keys (bare ids are `default`'s).
//!
//! Report rows need no conversion: they are keyed by campaign and by scoped order
//! id, so they follow the campaigns and orders above.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{decode, encode, KvStore, Ns, State, StateError};
use crate::model::segment::Segment;
use rm_ads::model::campaign::BannerXCampaign;
use rm_ads::model::catalog::Product;
use rm_auth::client::{ApiKey, Client};
use rm_schemas::namespace::DEFAULT;

/// The current format version.
pub const FORMAT: u32 = 1;
const FORMAT_KEY: &str = "format";

/// Brings `state` to [`FORMAT`]; how many records were rewritten.
pub async fn run(state: &State) -> Result<usize, StateError> {
    let kv = state.kv();
    let version: u32 = match kv.get(Ns::Meta, FORMAT_KEY).await? {
        Some(b) => decode(Ns::Meta, FORMAT_KEY, &b)?,
        None => 0,
    };
    if version > FORMAT {
        return Err(StateError::Backend(format!(
            "the api state is of format {version}, newer than this version knows ({FORMAT}); run a newer retail-media"
        )));
    }
    let mut n = 0;
    if version < 1 {
        n += rewrite::<Client>(state, Ns::Clients, |c| {
            c.namespace
                .is_empty()
                .then(|| c.namespace = DEFAULT.to_owned());
        })
        .await?;
        n += rewrite::<ApiKey>(state, Ns::ApiKeys, |k| {
            if k.key_id.is_empty() {
                k.key_id.clone_from(&k.name);
            }
            if k.namespace.is_empty() {
                k.namespace = DEFAULT.to_owned();
            }
        })
        .await?;
        n += rewrite::<Segment>(state, Ns::Segments, |s| {
            s.namespace_id = DEFAULT.to_owned();
        })
        .await?;
        n += rewrite::<Product>(state, Ns::Products, |p| {
            p.namespace_id = DEFAULT.to_owned();
        })
        .await?;
        n += rewrite::<BannerXCampaign>(state, Ns::Campaigns, |c| {
            c.namespace_id = DEFAULT.to_owned();
        })
        .await?;
        tracing::info!(records = n, "api state converted to format 1 (namespaces): everything before is in namespace 'default'");
    }
    if version < FORMAT {
        kv.put(Ns::Meta, FORMAT_KEY, encode(&FORMAT)).await?;
    }
    Ok(n)
}

/// Applies `change` to every record of `ns` and writes them back in one write.
async fn rewrite<T: Serialize + DeserializeOwned>(
    state: &State,
    ns: Ns,
    change: impl Fn(&mut T),
) -> Result<usize, StateError> {
    let kv = state.kv();
    let rows = kv.scan(ns).await?;
    let mut out = Vec::with_capacity(rows.len());
    for (k, v) in rows {
        // A value that does not decode is left as it is (reading it answers what it
        // answered before); it must not keep the api from starting.
        let mut t: T = match decode(ns, &k, &v) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "api state conversion: left an unreadable value as it was");
                continue;
            }
        };
        change(&mut t);
        out.push((k, encode(&t)));
    }
    let n = out.len();
    if n > 0 {
        kv.put_many(ns, out).await?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rm_auth::secret;

    /// Opens a copy of the state the version before namespaces wrote
    /// (`api/tests/fixtures/README.md`).
    fn previous_version() -> (tempfile::TempDir, State) {
        let dir = tempfile::tempdir().expect("tempdir");
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/state-before-namespaces.redb");
        std::fs::create_dir_all(dir.path().join("api")).expect("mkdir");
        std::fs::copy(&fixture, dir.path().join("api/state.redb")).expect("copy fixture");
        let state = State::open_embedded(dir.path()).expect("opens");
        (dir, state)
    }

    #[tokio::test]
    async fn a_state_written_before_namespaces_is_converted_to_default() {
        let (_dir, state) = previous_version();
        let rewritten = run(&state).await.expect("converts");
        assert!(
            rewritten >= 8,
            "every record is rewritten once: {rewritten}"
        );

        let partner = state.client("partner-a").await.unwrap().expect("kept");
        assert_eq!(partner.namespace, DEFAULT);
        assert!(secret::verify("partner-a-secret", &partner.secret_hash));
        let demo = state.client("demo-client").await.unwrap().expect("kept");
        assert_eq!(demo.namespace, DEFAULT);

        let key = state
            .api_key(&secret::lookup_digest("erp-key-1"))
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(
            (key.key_id.as_str(), key.namespace.as_str()),
            ("erp", DEFAULT)
        );

        let camp = state.campaign("legacy-camp").await.unwrap().expect("kept");
        assert_eq!(
            camp.namespace_id, DEFAULT,
            "was 'retailer-1', a free label then"
        );
        assert!(state
            .campaigns()
            .await
            .unwrap()
            .iter()
            .all(|c| c.namespace_id == DEFAULT));
        let seg = state.segment("legacy-seg").await.unwrap().expect("kept");
        assert_eq!(seg.namespace_id, DEFAULT);
        let p = state
            .product(DEFAULT, "legacy-cat", "lp1")
            .await
            .unwrap()
            .expect("same key as before");
        assert_eq!(p.namespace_id, DEFAULT);
        assert!(
            state.order_taken(DEFAULT, "legacy-order-1").await.unwrap(),
            "an order taken before stays taken: a re-send is a duplicate"
        );
        assert!(!state.order_taken("acme", "legacy-order-1").await.unwrap());

        // Once converted, nothing more to do; the version is recorded.
        assert_eq!(run(&state).await.unwrap(), 0);
        let v: u32 = decode(
            Ns::Meta,
            FORMAT_KEY,
            &state.kv().get(Ns::Meta, FORMAT_KEY).await.unwrap().unwrap(),
        )
        .unwrap();
        assert_eq!(v, FORMAT);
    }

    #[tokio::test]
    async fn an_unreadable_value_does_not_stop_the_conversion() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = State::open_embedded(dir.path()).expect("opens");
        state
            .kv()
            .put(Ns::Segments, "junk", b"1".to_vec())
            .await
            .unwrap();
        let good = Segment {
            id: "s".into(),
            ..Segment::default()
        };
        state
            .kv()
            .put(Ns::Segments, "s", encode(&good))
            .await
            .unwrap();
        assert_eq!(run(&state).await.unwrap(), 1);
        assert_eq!(
            state.segment("s").await.unwrap().unwrap().namespace_id,
            DEFAULT
        );
        assert_eq!(
            state.kv().get(Ns::Segments, "junk").await.unwrap().unwrap(),
            b"1"
        );
    }

    #[tokio::test]
    async fn a_newer_state_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = State::open_embedded(dir.path()).expect("opens");
        assert_eq!(
            run(&state).await.unwrap(),
            0,
            "a new state has nothing to convert"
        );
        state
            .kv()
            .put(Ns::Meta, FORMAT_KEY, encode(&(FORMAT + 1)))
            .await
            .unwrap();
        let e = run(&state).await.unwrap_err();
        assert!(e.to_string().contains("newer"), "{e}");
    }
}
