//! Key material on disk is readable by the service's user only: the data dir is made
//! `0700` and the files that hold secrets `0600` (the ad id key, which signs every
//! served ad id and click destination; the api's embedded state, which holds the
//! token-signing seeds). A file or dir found wider at start (written by an earlier
//! version, or by hand) is tightened, with a warning naming it, before any service
//! reads it; a new key file is created `0600` from its first byte.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The data dir's mode.
pub const DIR_MODE: u32 = 0o700;
/// A secret file's mode.
pub const FILE_MODE: u32 = 0o600;

/// The files under `data_dir` that hold secrets, whether or not they exist yet.
pub fn secret_files(data_dir: &Path) -> Vec<PathBuf> {
    vec![
        data_dir.join("ad-id.key"),
        data_dir.join("api").join("state.redb"),
    ]
}

/// Creates `data_dir` if needed and narrows it and its secret files to their modes,
/// warning for each one that was wider (found so at start).
pub fn tighten(data_dir: &Path) -> std::io::Result<()> {
    tighten_with(data_dir, true)
}

/// [`tighten`] for files this process has just created (the api's embedded state,
/// which its store creates with the default mode): narrowed without a warning.
pub fn tighten_new(data_dir: &Path) -> std::io::Result<()> {
    tighten_with(data_dir, false)
}

fn tighten_with(data_dir: &Path, warn: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    narrow(data_dir, DIR_MODE, warn)?;
    let api = data_dir.join("api");
    if api.is_dir() {
        narrow(&api, DIR_MODE, warn)?;
    }
    for f in secret_files(data_dir) {
        if f.is_file() {
            narrow(&f, FILE_MODE, warn)?;
        }
    }
    Ok(())
}

/// Sets `path` to `mode` when its permission bits allow more (group or others).
fn narrow(path: &Path, mode: u32, warn: bool) -> std::io::Result<()> {
    let was = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if was & !mode != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        if !warn {
            return Ok(());
        }
        tracing::warn!(
            path = %path.display(),
            was = format!("{was:o}"),
            now = format!("{mode:o}"),
            "narrowed the permissions of a path holding key material"
        );
    }
    Ok(())
}

/// Writes `contents` to a new file at `path` with mode `0600` from its creation.
pub fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn wide_paths_are_narrowed_and_narrow_ones_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("api")).unwrap();
        let key = data.join("ad-id.key");
        std::fs::write(&key, "k").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let other = data.join("notes.txt");
        std::fs::write(&other, "x").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
        tighten(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("api")), 0o700);
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&other), 0o644, "only key material is narrowed");
        let new = data.join("new.key");
        write_new(&new, "secret").unwrap();
        assert_eq!(mode(&new), 0o600);
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "secret");
    }
}
