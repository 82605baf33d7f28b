//! The lattice the analysis computes over: a value is clean, or depends on a source
//! and/or on the function's parameters, each with a witness path.

use super::{Path, Step};

/// A value's trust: clean, or untrusted because of a source and/or of parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Taint {
    pub(super) source: Option<Path>,
    pub(super) params: Params,
}

/// The parameters a value depends on, each with the steps since (most have none, and
/// cost no allocation). Functions have at most 64 parameters that count; a 65th and
/// later share the last bit.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct Params {
    bits: u64,
    /// The non-empty paths, by parameter.
    paths: Vec<(u32, Path)>,
}

impl Params {
    pub(super) fn bit(i: u32) -> u64 {
        1 << i.min(63)
    }

    pub(super) fn one(i: u32) -> Params {
        Params {
            bits: Params::bit(i),
            paths: Vec::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bits == 0
    }

    /// Each parameter with its path.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &[Step])> {
        (0..64u32).filter(|i| self.bits & (1 << i) != 0).map(|i| {
            let path = self
                .paths
                .iter()
                .find(|(p, _)| *p == i)
                .map_or(&[][..], |(_, path)| path.as_slice());
            (i, path)
        })
    }

    pub(super) fn join(&mut self, other: &Params) {
        for (i, path) in &other.paths {
            if self.bits & Params::bit(*i) == 0 {
                self.paths.push((*i, path.clone()));
            }
        }
        self.bits |= other.bits;
    }

    pub(super) fn extend(&mut self, steps: &[Step]) {
        if self.bits == 0 || steps.is_empty() {
            return;
        }
        for i in (0..64u32).filter(|i| self.bits & (1 << i) != 0) {
            match self.paths.iter_mut().find(|(p, _)| *p == i) {
                Some((_, path)) => path.extend_from_slice(steps),
                None => self.paths.push((i, steps.to_vec())),
            }
        }
    }
}

impl Taint {
    pub(super) fn source(step: Step) -> Taint {
        Taint {
            source: Some(vec![step]),
            params: Params::default(),
        }
    }

    pub(super) fn is_clean(&self) -> bool {
        self.source.is_none() && self.params.is_empty()
    }

    pub(super) fn join(&mut self, other: &Taint) {
        if self.source.is_none() {
            self.source.clone_from(&other.source);
        }
        self.params.join(&other.params);
    }

    pub(super) fn joined(mut self, other: &Taint) -> Taint {
        self.join(other);
        self
    }

    /// A step every path takes: into a context, out of the model.
    pub(super) fn then(mut self, step: &Step) -> Taint {
        if let Some(p) = &mut self.source {
            p.push(step.clone());
        }
        self.params.extend(std::slice::from_ref(step));
        self
    }

    /// A step recorded on the way from a source only: inside a function, the way from a
    /// parameter is told by the sink it reaches (this keeps parameter paths, which are
    /// everywhere, free of allocation).
    pub(super) fn then_source(mut self, step: &Step) -> Taint {
        if let Some(p) = &mut self.source {
            p.push(step.clone());
        }
        self
    }

    pub(super) fn then_path(mut self, steps: &[Step]) -> Taint {
        if let Some(p) = &mut self.source {
            p.extend_from_slice(steps);
        }
        self.params.extend(steps);
        self
    }

    /// Same sources and parameters: what the loop fixed point compares.
    pub(super) fn same_shape(&self, other: &Taint) -> bool {
        self.source.is_some() == other.source.is_some() && self.params.bits == other.params.bits
    }
}
