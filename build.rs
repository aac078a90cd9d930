//! Puts the git commit this build comes from into `SIMNODE_GIT_COMMIT` (its first four bytes,
//! as `engine_getClientVersionV1` reports them); eight zeros outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"])
        .filter(|c| c.len() >= 8 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|c| c[..8].to_ascii_lowercase())
        .unwrap_or_else(|| "00000000".into());
    println!("cargo:rustc-env=SIMNODE_GIT_COMMIT={commit}");
    // Build again when the checkout moves to another commit: HEAD, the branches, or the packed
    // refs a branch may live in.
    // Only files that exist: cargo runs a build script whose watched file is missing every time.
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        // A directory is watched with every file under it: a new commit rewrites its branch's file.
        for file in ["HEAD", "packed-refs", "refs/heads"] {
            let path = std::path::Path::new(&dir).join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
