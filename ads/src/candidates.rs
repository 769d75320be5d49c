//! Pruning for decisioning: which campaigns, and for wildcard campaigns which
//! products, can pass a request's filters, found through the category index
//! instead of by testing every advertised product against every filter.
//!
//! A product passes a filter path only if the path is one of its category prefixes,
//! so a campaign can have a passing product only if its advertised products
//! together cover the paths: under `OrAnd` every path of some group, under `AndOr`
//! some path of every group. [`Coverage`] maps each category (by id) to the
//! campaigns covering it and answers that necessary condition for a whole request
//! in time proportional to the campaigns listed under its paths. The survivors are
//! then checked product by product as before, so the decision is unchanged.
//!
//! Wildcard campaigns cover everything; [`passing_products`] gives them, once per
//! request, the first [`super::index::MAX_SCAN`] candidates (in catalog order) of the
//! smallest category lists that every passing product must be in, filtered to
//! those that pass.

use std::collections::HashMap;

use super::request::{passes, FilterMode};

/// Category id -> campaigns (positions in one ranked list) whose products cover it.
#[derive(Debug, Default)]
pub struct Coverage {
    by_category: HashMap<u32, Vec<u32>>,
    /// Wildcard campaigns: candidates for every request.
    always: Vec<u32>,
    len: usize,
}

impl Coverage {
    /// Coverage of a ranked list: for each campaign, `None` (wildcard) or the
    /// category ids its advertised products are in (any order, repeats allowed).
    pub fn build(campaigns: impl IntoIterator<Item = Option<Vec<u32>>>) -> Coverage {
        let mut c = Coverage::default();
        for (pos, cats) in campaigns.into_iter().enumerate() {
            let pos = pos as u32;
            c.len += 1;
            match cats {
                None => c.always.push(pos),
                Some(mut ids) => {
                    ids.sort_unstable();
                    ids.dedup();
                    for id in ids {
                        c.by_category.entry(id).or_default().push(pos);
                    }
                }
            }
        }
        c
    }

    /// Which campaigns may have a product passing `groups` (filter paths resolved to
    /// category ids, `None` for a path no product is in) under `mode`; `None` when
    /// there are no filters (every campaign may).
    pub fn candidates(&self, groups: &[Vec<Option<u32>>], mode: FilterMode) -> Option<Vec<bool>> {
        if groups.is_empty() {
            return None;
        }
        let mut mark = vec![false; self.len];
        for &w in &self.always {
            mark[w as usize] = true;
        }
        let list = |id: &u32| self.by_category.get(id).map_or(&[][..], Vec::as_slice);
        let mut count = vec![0u16; self.len];
        match mode {
            FilterMode::OrAnd => {
                for g in groups {
                    // A path no product is in: the group passes nothing.
                    let Some(mut ids) = g.iter().copied().collect::<Option<Vec<u32>>>() else {
                        continue;
                    };
                    ids.sort_unstable();
                    ids.dedup();
                    for id in &ids {
                        for &e in list(id) {
                            count[e as usize] += 1;
                        }
                    }
                    for id in &ids {
                        for &e in list(id) {
                            if count[e as usize] as usize == ids.len() {
                                mark[e as usize] = true;
                            }
                        }
                    }
                    for id in &ids {
                        for &e in list(id) {
                            count[e as usize] = 0;
                        }
                    }
                }
            }
            FilterMode::AndOr => {
                let mut stamp = vec![0u16; self.len];
                for (gi, g) in groups.iter().enumerate() {
                    let gi = gi as u16 + 1;
                    for id in g.iter().flatten() {
                        for &e in list(id) {
                            if stamp[e as usize] != gi {
                                stamp[e as usize] = gi;
                                count[e as usize] += 1;
                            }
                        }
                    }
                }
                for (m, &c) in mark.iter_mut().zip(&count) {
                    *m |= c as usize == groups.len();
                }
            }
        }
        Some(mark)
    }
}

/// The products (ascending, at most `cap` looked at) that pass `filters` under
/// `mode`, drawn from category lists every passing product is in: under `OrAnd` the
/// smallest list of each group, under `AndOr` the lists of the group whose lists
/// are smallest in total. Computed only as far as asked ([`PassingPool::get`]), so
/// a request whose wildcard campaigns take the first few pays for those few.
#[derive(Debug)]
pub struct PassingPool<'a> {
    lists: Vec<&'a [u32]>,
    at: Vec<usize>,
    left: usize,
    out: Vec<u32>,
}

impl<'a> PassingPool<'a> {
    /// A pool for `filters`; `list` gives a path's products, ascending (`None` for a
    /// path no product is in).
    pub fn new(
        filters: &[Vec<String>],
        mode: FilterMode,
        list: impl Fn(&str) -> Option<&'a [u32]>,
        cap: usize,
    ) -> PassingPool<'a> {
        let lists: Vec<&[u32]> = match mode {
            FilterMode::OrAnd => filters
                .iter()
                .filter_map(|g| {
                    g.iter()
                        .map(|p| list(p))
                        .collect::<Option<Vec<_>>>()?
                        .into_iter()
                        .min_by_key(|l| l.len())
                })
                .collect(),
            FilterMode::AndOr => filters
                .iter()
                .map(|g| g.iter().filter_map(|p| list(p)).collect::<Vec<_>>())
                .min_by_key(|ls| ls.iter().map(|l| l.len()).sum::<usize>())
                .unwrap_or_default(),
        };
        PassingPool {
            at: vec![0; lists.len()],
            lists,
            left: cap,
            out: Vec::new(),
        }
    }

    /// The `i`-th passing product, merging the lists (without repeats) as far as
    /// needed; `in_cat` says whether a product is in a path.
    pub fn get(
        &mut self,
        i: usize,
        filters: &[Vec<String>],
        mode: FilterMode,
        in_cat: impl Fn(u32, &str) -> bool,
    ) -> Option<u32> {
        while self.out.len() <= i && self.left > 0 {
            let idx = self
                .lists
                .iter()
                .zip(&self.at)
                .filter_map(|(l, &k)| l.get(k).copied())
                .min()?;
            for (l, k) in self.lists.iter().zip(self.at.iter_mut()) {
                if l.get(*k) == Some(&idx) {
                    *k += 1;
                }
            }
            self.left -= 1;
            if passes(filters, mode, |p| in_cat(idx, p)) {
                self.out.push(idx);
            }
        }
        self.out.get(i).copied()
    }
}

/// Every product of a [`PassingPool`] (tests and tools).
pub fn passing_products<'a>(
    filters: &[Vec<String>],
    mode: FilterMode,
    list: impl Fn(&str) -> Option<&'a [u32]>,
    in_cat: impl Fn(u32, &str) -> bool,
    cap: usize,
) -> Vec<u32> {
    let mut pool = PassingPool::new(filters, mode, list, cap);
    (0..)
        .map_while(|i| pool.get(i, filters, mode, &in_cat))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_both_modes() {
        // Campaign 0 covers categories 1 and 2, campaign 1 covers 2, 2 is a wildcard.
        let c = Coverage::build([Some(vec![1, 2, 2]), Some(vec![2]), None]);
        assert_eq!(c.candidates(&[], FilterMode::OrAnd), None);
        let or_and = |g: &[&[Option<u32>]]| {
            let g: Vec<Vec<Option<u32>>> = g.iter().map(|x| x.to_vec()).collect();
            c.candidates(&g, FilterMode::OrAnd)
        };
        assert_eq!(
            or_and(&[&[Some(1), Some(2)]]),
            Some(vec![true, false, true])
        );
        assert_eq!(or_and(&[&[Some(2)]]), Some(vec![true, true, true]));
        assert_eq!(
            or_and(&[&[Some(1), None], &[Some(3)]]),
            Some(vec![false, false, true])
        );
        let and_or = |g: &[&[Option<u32>]]| {
            let g: Vec<Vec<Option<u32>>> = g.iter().map(|x| x.to_vec()).collect();
            c.candidates(&g, FilterMode::AndOr)
        };
        assert_eq!(
            and_or(&[&[Some(1), None], &[Some(2)]]),
            Some(vec![true, false, true])
        );
        assert_eq!(
            and_or(&[&[Some(2)], &[None]]),
            Some(vec![false, false, true])
        );
    }

    #[test]
    fn passing_products_merge_in_order() {
        let lists: HashMap<&str, Vec<u32>> = HashMap::from([
            ("a", vec![1, 3, 5, 7]),
            ("b", vec![3, 4, 7]),
            ("c", vec![2, 7]),
        ]);
        let list = |p: &str| lists.get(p).map(Vec::as_slice);
        let in_cat = |i: u32, p: &str| lists.get(p).is_some_and(|l| l.contains(&i));
        let f = |g: &[&[&str]]| -> Vec<Vec<String>> {
            g.iter()
                .map(|x| x.iter().map(|s| (*s).to_owned()).collect())
                .collect()
        };
        let or_and = f(&[&["a", "b"], &["c"]]);
        assert_eq!(
            passing_products(&or_and, FilterMode::OrAnd, list, in_cat, 100),
            vec![2, 3, 7]
        );
        assert_eq!(
            passing_products(&or_and, FilterMode::OrAnd, list, in_cat, 1),
            vec![2]
        );
        // Looking at 2 candidates of a, b or c (2 and 3) finds no product in a and c.
        let and_or = f(&[&["a", "b"], &["c", "x"]]);
        assert!(passing_products(&and_or, FilterMode::AndOr, list, in_cat, 1).is_empty());
        assert_eq!(
            passing_products(&and_or, FilterMode::AndOr, list, in_cat, 100),
            vec![7]
        );
        let none = f(&[&["x"]]);
        assert!(passing_products(&none, FilterMode::OrAnd, list, in_cat, 100).is_empty());
        assert!(passing_products(&none, FilterMode::AndOr, list, in_cat, 100).is_empty());
    }
}
