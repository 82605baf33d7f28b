//! Type variables and unification: integer literals (`int_only` variables), empty lists,
//! `None`, and the type parameters of the generic standard externs.

use syntax::Span;

use super::{Checker, Var};
use crate::diagnostics as diag;
use crate::ty::Ty;

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn fresh(&mut self, int_only: bool) -> Ty<'db> {
        self.vars.push(Var {
            binding: None,
            int_only,
        });
        Ty::Var(self.vars.len() as u32 - 1)
    }

    /// Follows variable bindings at the top of `t`.
    pub(super) fn shallow(&self, t: &Ty<'db>) -> Ty<'db> {
        let mut t = t.clone();
        while let Ty::Var(v) = t {
            match &self.vars[v as usize].binding {
                Some(b) => t = b.clone(),
                None => break,
            }
        }
        t
    }

    /// Replaces every bound variable in `t`.
    pub(super) fn resolve(&self, t: &Ty<'db>) -> Ty<'db> {
        match self.shallow(t) {
            Ty::List(inner) => Ty::List(Box::new(self.resolve(&inner))),
            Ty::Option(inner) => Ty::Option(Box::new(self.resolve(&inner))),
            other => other,
        }
    }

    pub(super) fn display(&self, t: &Ty<'db>) -> String {
        let t = self.resolve(t);
        match t {
            Ty::Var(v) if self.vars[v as usize].int_only => "{integer}".to_owned(),
            t => t.display(self.db),
        }
    }

    pub(super) fn occurs(&self, v: u32, t: &Ty<'db>) -> bool {
        match self.shallow(t) {
            Ty::Var(w) => v == w,
            Ty::List(inner) | Ty::Option(inner) => self.occurs(v, &inner),
            _ => false,
        }
    }

    pub(super) fn bind(&mut self, v: u32, t: Ty<'db>) -> bool {
        if let Ty::Var(w) = t {
            if v == w {
                return true;
            }
            let int_only = self.vars[v as usize].int_only || self.vars[w as usize].int_only;
            self.vars[w as usize].int_only = int_only;
            self.vars[v as usize].binding = Some(Ty::Var(w));
            return true;
        }
        if self.vars[v as usize].int_only && !matches!(t, Ty::I32 | Ty::I64 | Ty::Error | Ty::Never)
        {
            return false;
        }
        if self.occurs(v, &t) {
            return false;
        }
        self.vars[v as usize].binding = Some(t);
        true
    }

    pub(super) fn unify(&mut self, a: &Ty<'db>, b: &Ty<'db>) -> bool {
        let (a, b) = (self.shallow(a), self.shallow(b));
        match (a, b) {
            (Ty::Error, _) | (_, Ty::Error) | (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Var(v), t) | (t, Ty::Var(v)) => self.bind(v, t),
            (Ty::List(x), Ty::List(y)) | (Ty::Option(x), Ty::Option(y)) => self.unify(&x, &y),
            (x, y) => x == y,
        }
    }

    /// Reports a mismatch at `span` unless `found` fits `expected`.
    pub(super) fn expect(&mut self, span: Span, found: &Ty<'db>, expected: &Ty<'db>) {
        if !self.unify(found, expected) {
            let d = diag::mismatch(
                self.item,
                span,
                &self.display(expected),
                &self.display(found),
            );
            self.diagnostics.push(d);
        }
    }

    /// A type after inference, with unknowns as `Error`.
    pub(super) fn resolve_final(&self, t: &Ty<'db>) -> Ty<'db> {
        let t = self.resolve(t);
        if matches!(t, Ty::Var(_)) {
            Ty::Error
        } else {
            t
        }
    }
}

pub(super) fn instantiate<'db>(t: &Ty<'db>, vars: &[Ty<'db>]) -> Ty<'db> {
    match t {
        Ty::Param(i) => vars[*i as usize].clone(),
        Ty::List(inner) => Ty::List(Box::new(instantiate(inner, vars))),
        Ty::Option(inner) => Ty::Option(Box::new(instantiate(inner, vars))),
        other => other.clone(),
    }
}
