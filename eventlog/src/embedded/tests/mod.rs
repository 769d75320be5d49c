//! The embedded log's unit tests, one file per concern: a writer killed mid-commit
//! (`crash`), the redb log of an earlier version converted at open (`migration`), old
//! group commits removed once every consumer is past them (`retention`), and a torn
//! tail cut back at open (`torn_tail`).

mod crash;
mod migration;
mod retention;
mod torn_tail;
