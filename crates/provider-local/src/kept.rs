//! The keys and values of runs' first prompts kept across runs (`SAP_LOCAL_KV_CACHE`),
//! for the in-process model: the file store and its checked format.

use std::path::{Path, PathBuf};

use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::token::LlamaToken;

use crate::cache::{Context, remove};

/// Keys and values of prompts' beginnings kept across runs, one file each, as a warm
/// server keeps its prompt cache. A run's first call keeps two: its system turn (the
/// instructions to every call and the answer's shape) and its whole prompt but the
/// last token. A later run's first call restores the longer one its prompt starts
/// with: a repeated run evaluates one token of it, a run with other input its user
/// turn.
///
/// A restored state is the same bits as one evaluated afresh: a call into an empty
/// cache evaluates its prompt in batches that end where the kept beginnings end, and a
/// state is restored only into an empty cache, so its cells sit where they would.
/// Files are named by everything that could change those bits — the model file (path,
/// size, time), this executable (a rebuild is another llama.cpp), the threads and the
/// context's size — and by the tokens, which the file holds too and which are compared
/// on loading. `SAP_LOCAL_KV_CACHE` names the folder (default
/// `~/.cache/sap/local-kv`); `0` turns it off, as `LOCAL_REUSE=0` does.
pub(super) struct Kept {
    dir: PathBuf,
    key: u64,
}

/// Files kept in the folder at most, and their bytes (SmolLM2-135M's keys and values
/// take 23 KB a token: 3–4 MB for a system turn, 5–6 MB for the examples' first
/// prompts; a 7B model's about 5 times more a token); the oldest go first. A state
/// larger than an eighth of the bytes is not kept: it would push out most of the others.
const KEPT_FILES: usize = 64;
const KEPT_BYTES: u64 = 512 * 1024 * 1024;

impl Kept {
    pub(super) fn from_env(model: &Path, threads: i32) -> Option<Kept> {
        let dir = match std::env::var_os("SAP_LOCAL_KV_CACHE") {
            Some(v) if v == "0" || v.is_empty() => return None,
            Some(v) => PathBuf::from(v),
            None => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
                base.join("sap").join("local-kv")
            }
        };
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let stamp = |p: &Path, h: &mut std::collections::hash_map::DefaultHasher| {
            let meta = std::fs::metadata(p).ok();
            p.hash(h);
            meta.as_ref().map(std::fs::Metadata::len).hash(h);
            meta.and_then(|m| m.modified().ok()).hash(h);
        };
        stamp(&std::fs::canonicalize(model).ok()?, &mut h);
        stamp(&std::env::current_exe().ok()?, &mut h);
        threads.hash(&mut h);
        Some(Kept {
            dir,
            key: h.finish(),
        })
    }

    fn file(&self, ctx: &Context<'_>, tokens: &[LlamaToken]) -> PathBuf {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.key.hash(&mut h);
        ctx.n_ctx().hash(&mut h);
        for t in tokens {
            t.0.hash(&mut h);
        }
        self.dir.join(format!("{:016x}.kv", h.finish()))
    }

    /// Loads `tokens`' keys and values into sequence `seq` of an empty cache; false
    /// (and the sequence left empty) when none are kept or the file is not whole.
    pub(super) fn restore(&self, ctx: &mut Context<'_>, seq: usize, tokens: &[LlamaToken]) -> bool {
        let file = self.file(ctx, tokens);
        let Ok(bytes) = std::fs::read(&file) else {
            return false;
        };
        let Some(state) = kept_state(&bytes, tokens) else {
            // Torn or damaged: this run writes it again.
            let _ = std::fs::remove_file(&file);
            return false;
        };
        // SAFETY: llama.cpp parses the state without checking it, so only a file that
        // is whole (its length and checksum), that holds these tokens and that was
        // written by this executable for this model, threads and context size (its
        // name) gets here: bytes llama.cpp wrote for a context like this one.
        #[allow(unsafe_code)]
        let set =
            unsafe { ctx.state_seq_set_data_ext(state, seq as i32, LlamaStateSeqFlags::empty()) };
        if set {
            // Used now: the last the pruning deletes.
            let now = std::time::SystemTime::now();
            let _ = std::fs::File::options()
                .append(true)
                .open(&file)
                .and_then(|f| f.set_modified(now));
        } else {
            let _ = remove(ctx, seq, 0);
        }
        set
    }

    /// Writes sequence `seq`'s keys and values of `tokens`, if not kept already. A
    /// cache that cannot be written costs nothing but the next run's time.
    pub(super) fn save(&self, ctx: &Context<'_>, seq: usize, tokens: &[LlamaToken]) {
        let file = self.file(ctx, tokens);
        if file.is_file() || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let flags = LlamaStateSeqFlags::empty();
        let size = ctx.state_seq_get_size_ext(seq as i32, flags);
        if size as u64 > KEPT_BYTES / 8 {
            return;
        }
        let mut state = vec![0u8; size];
        // SAFETY: `state` has the room llama.cpp says the sequence's state needs.
        #[allow(unsafe_code)]
        let written = unsafe { ctx.state_seq_get_data_ext(state.as_mut_ptr(), seq as i32, flags) };
        if written != size {
            return;
        }
        // Written aside and renamed, so a run reading it meanwhile never sees half.
        let part = file.with_extension(format!("{}.part", std::process::id()));
        let written = std::fs::File::create(&part).and_then(|mut f| {
            use std::io::Write;
            f.write_all(&kept_head(tokens, &state))?;
            f.write_all(&state)
        });
        if written.is_err() || std::fs::rename(&part, &file).is_err() {
            let _ = std::fs::remove_file(&part);
            return;
        }
        self.prune();
    }

    /// Deletes the oldest files beyond `KEPT_FILES` or `KEPT_BYTES`.
    fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "kv"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        let mut bytes = 0;
        for (i, (_, len, path)) in files.iter().enumerate() {
            bytes += len;
            if i >= KEPT_FILES || bytes > KEPT_BYTES {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// A kept file: `KEPT_MAGIC`, the number of tokens, the tokens, the state's length,
/// a checksum of all before it and the state, then the state.
const KEPT_MAGIC: &[u8; 8] = b"sapkv\x001\n";

/// All of a kept file before its state (written apart: the state may be tens of MB).
fn kept_head(tokens: &[LlamaToken], state: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * tokens.len() + 32);
    out.extend_from_slice(KEPT_MAGIC);
    out.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
    for t in tokens {
        out.extend_from_slice(&t.0.to_le_bytes());
    }
    out.extend_from_slice(&(state.len() as u64).to_le_bytes());
    let sum = checksum(&out, state);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The state in a kept file, if the file is whole and holds `tokens`.
fn kept_state<'b>(bytes: &'b [u8], tokens: &[LlamaToken]) -> Option<&'b [u8]> {
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    if bytes.get(..8)? != KEPT_MAGIC || u64_at(8)? != tokens.len() as u64 {
        return None;
    }
    let mut at = 16;
    for t in tokens {
        let held = i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        if held != t.0 {
            return None;
        }
        at += 4;
    }
    let len = usize::try_from(u64_at(at)?).ok()?;
    let head = at + 8;
    let sum = u64_at(head)?;
    let state = bytes.get(head + 8..)?;
    (state.len() == len && checksum(&bytes[..head], state) == sum).then_some(state)
}

/// FNV-1a over `head` and `state`: a torn or corrupted file, not an attacker (the
/// folder is the user's own).
fn checksum(head: &[u8], state: &[u8]) -> u64 {
    head.iter()
        .chain(state)
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept_file(tokens: &[LlamaToken], state: &[u8]) -> Vec<u8> {
        [kept_head(tokens, state), state.to_vec()].concat()
    }

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().map(|&i| LlamaToken::new(i)).collect()
    }

    #[test]
    fn a_kept_file_gives_back_its_state_for_its_tokens_only() {
        let held = tokens(&[1, 2, 3]);
        let state = b"the keys and values".to_vec();
        let file = kept_file(&held, &state);
        assert_eq!(kept_state(&file, &held), Some(&state[..]));
        // Other tokens, fewer or more: not this file's state (a name's hash collided).
        assert_eq!(kept_state(&file, &tokens(&[1, 2, 4])), None);
        assert_eq!(kept_state(&file, &tokens(&[1, 2])), None);
        assert_eq!(kept_state(&file, &tokens(&[1, 2, 3, 4])), None);
    }

    #[test]
    fn a_damaged_kept_file_gives_nothing() {
        let held = tokens(&[7, 8]);
        let file = kept_file(&held, &[5u8; 64]);
        for cut in [0, 7, 8, 20, file.len() - 1] {
            assert_eq!(kept_state(&file[..cut], &held), None, "cut at {cut}");
        }
        for at in [0, 9, 17, 30, file.len() - 1] {
            let mut flipped = file.clone();
            flipped[at] ^= 0x10;
            assert_eq!(kept_state(&flipped, &held), None, "bit flipped at {at}");
        }
        let mut longer = file.clone();
        longer.push(0);
        assert_eq!(kept_state(&longer, &held), None, "a byte too many");
    }
}
