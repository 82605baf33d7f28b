//! What the KV cache holds, sequence by sequence: which prompts' tokens are evaluated
//! where, which sequence a new prompt extends, and which one makes room.

use llama_cpp_2::token::LlamaToken;
use llm::ProviderError;

use crate::failed;

/// Sequences the KV cache keeps at once, in one pool of cells.
pub(crate) const SEQUENCES: usize = 4;

pub(crate) type Context<'m> = llama_cpp_2::context::LlamaContext<'m>;

/// What the KV cache holds: for each sequence, the tokens whose keys and values it has,
/// in order, and when it was last used.
///
/// A prompt is the context stack rendered outermost frame first, so prompts that share
/// frames share a prefix. A new prompt goes to the sequence holding the longest prefix
/// of it. When it extends all of that sequence, it is evaluated there; when it leaves
/// it part way (a sibling call: another item of a `parallel for`, another branch of a
/// plan), the shared prefix is copied — the copy shares the cells, nothing is
/// evaluated — into the sequence used longest ago, and the prompt is evaluated there,
/// so the tail it left stays cached for the calls that come back to it.
#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) sequences: [Sequence; SEQUENCES],
    clock: u64,
}

#[derive(Default)]
pub(crate) struct Sequence {
    pub(crate) tokens: Vec<LlamaToken>,
    used: u64,
}

impl Cache {
    /// Whether no sequence holds any cells.
    pub(crate) fn is_empty(&self) -> bool {
        self.sequences.iter().all(|s| s.tokens.is_empty())
    }

    pub(crate) fn clear(&mut self, ctx: &mut Context<'_>) {
        ctx.clear_kv_cache();
        *self = Cache::default();
    }

    /// The sequence `prompt` is evaluated in, holding its first tokens (how many is
    /// returned): at least the last prompt token is left to evaluate, for the logits of
    /// the answer's first token.
    pub(crate) fn place(
        &mut self,
        ctx: &mut Context<'_>,
        prompt: &[LlamaToken],
    ) -> Result<(usize, usize), ProviderError> {
        let limit = prompt.len().saturating_sub(1);
        let shared = |s: &Sequence| {
            let n = s
                .tokens
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count();
            n.min(limit)
        };
        let (best, common) = self
            .sequences
            .iter()
            .map(shared)
            .enumerate()
            .max_by_key(|&(i, n)| (n, self.sequences[i].used))
            .expect("at least one sequence");
        let target = if common == self.sequences[best].tokens.len() {
            best
        } else {
            let victim = (0..SEQUENCES)
                .filter(|&i| i != best)
                .min_by_key(|&i| self.sequences[i].used)
                .unwrap_or(best);
            if victim != best {
                remove(ctx, victim, 0)?;
                if common > 0 {
                    ctx.copy_kv_cache_seq(best as i32, victim as i32, None, Some(common as u32))
                        .map_err(|e| failed(format!("the KV cache: {e}")))?;
                }
                let tokens = self.sequences[best].tokens[..common].to_vec();
                self.sequences[victim].tokens = tokens;
            }
            victim
        };
        remove(ctx, target, common)?;
        self.sequences[target].tokens.truncate(common);
        self.clock += 1;
        self.sequences[target].used = self.clock;
        Ok((target, common))
    }

    /// Frees the cells of the sequence used longest ago that holds any, other than
    /// `keeping`; false when there is none.
    pub(crate) fn evict(
        &mut self,
        ctx: &mut Context<'_>,
        keeping: usize,
    ) -> Result<bool, ProviderError> {
        let Some(victim) = (0..SEQUENCES)
            .filter(|&i| i != keeping && !self.sequences[i].tokens.is_empty())
            .min_by_key(|&i| self.sequences[i].used)
        else {
            return Ok(false);
        };
        remove(ctx, victim, 0)?;
        self.sequences[victim] = Sequence::default();
        Ok(true)
    }
}

/// Removes sequence `seq`'s tokens from position `from` on.
pub(crate) fn remove(ctx: &mut Context<'_>, seq: usize, from: usize) -> Result<(), ProviderError> {
    ctx.clear_kv_cache_seq(Some(seq as u32), Some(from as u32), None)
        .map_err(|e| failed(format!("the KV cache: {e}")))?;
    Ok(())
}
