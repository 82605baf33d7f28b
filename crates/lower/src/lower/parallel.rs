//! `parallel for`: the body is outlined as a function of its own, given the values of the
//! locals hir says are visible there (a body cannot assign them, so passing their values
//! is exact) and then the element.

use syntax::ast::{self, Expr};

use super::FnLower;
use ir::*;

impl<'a, 'db> FnLower<'a, 'db> {
    /// The body becomes a function of its own, given every variable in scope (a body
    /// cannot assign them, so passing their values is exact) and then the element.
    pub(super) fn lower_parallel_for(
        &mut self,
        e: &Expr,
        var: &ast::Ident,
        iter: &Expr,
        body: &ast::Block,
        ty: Type,
    ) -> ValueId {
        let list = self.expr(iter);
        let elem_ty = match self.type_of(iter) {
            Type::List(e) => *e,
            _ => Type::Unit,
        };
        let result_ty = match &ty {
            Type::List(e) => (**e).clone(),
            _ => Type::Unit,
        };
        let hir_body = self.body;
        let captured = hir_body.captures.get(e.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir gave no captures to the `parallel for` at {:?}",
                e.span
            )
        });
        let visible: Vec<(String, LocalId)> = captured
            .iter()
            .map(|&l| (hir_body.locals[l.0 as usize].name.clone(), self.local(l)))
            .collect();
        let captures: Vec<ValueId> = visible
            .iter()
            .map(|(_, local)| {
                let t = self.f.locals[*local as usize].ty.clone();
                self.emit(Op::Load(*local), t, None)
            })
            .collect();
        let mut params: Vec<Param> = visible
            .iter()
            .map(|(name, local)| Param {
                name: name.clone(),
                doc: None,
                ty: self.f.locals[*local as usize].ty.clone(),
                trusted: false,
            })
            .collect();
        params.push(Param {
            name: var.name.clone(),
            doc: None,
            ty: elem_ty,
            trusted: false,
        });
        let body_id = self.m.module.functions.len() as FuncId;
        let name = format!(
            "{}::parallel_for@{}",
            self.f.name,
            self.base + body.span.start
        );
        let function = Function {
            name: name.clone(),
            doc: None,
            params: params.clone(),
            ret: result_ty,
            effect: self.f.effect,
            returns_untrusted: self.f.returns_untrusted,
            locals: Vec::new(),
            context: None,
            blocks: vec![Block::default()],
            value_count: 0,
            span: self.src(body.span),
        };
        self.m.module.functions.push(function.clone());
        let outer_context = self
            .f
            .context
            .and_then(|c| visible.iter().position(|(_, l)| *l == c));
        let mut inner = FnLower::new(&mut *self.m, self.item, self.file, function);
        for p in &params {
            inner.new_local(&p.name, p.ty.clone());
        }
        // The body's variables are the parameters: the captures, then the element.
        for (i, &l) in captured.iter().enumerate() {
            inner.locals.insert(l, i as LocalId);
        }
        let element = *hir_body.declared.get(iter.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir declared no `parallel for` variable at {:?}",
                iter.span
            )
        });
        inner.locals.insert(element, captured.len() as LocalId);
        if let Some(i) = outer_context {
            // Each iteration sees the loop's context and its own injections.
            let local = i as LocalId;
            inner.f.context = Some(local);
            let outer = inner.emit(Op::Load(local), Type::Context, None);
            let frame = inner.emit(Op::ContextChild(outer), Type::Context, None);
            inner.emit_void(Op::Store(local, frame), None);
        }
        let v = inner.lower_block(body);
        inner.terminate(Terminator::Return(v));
        let lowered = inner.f;
        self.m.module.functions[body_id as usize] = lowered;
        self.emit(
            Op::ParallelFor {
                list,
                body: body_id,
                captures,
            },
            ty,
            Some(self.src(iter.span)),
        )
    }
}
