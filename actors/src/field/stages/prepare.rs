//! `prepare`: enriches the state, decides nothing. Generates at most one fresh decomposition per
//! tick for a needed requires-components field that has no recipe (the proactive decomposition, a
//! model call), rebuilds the recipe graph and the running schema, and composes every field whose
//! components all have values (`compose_ready_fields`).
//!
//! The decomposition helpers here serve `acquire` and `enforce_policy` too, which generate one for
//! a blocked or a targeted field.

use super::{applied, Env, StageResult};
use crate::field::formula;
use crate::field::policy::DecomposeRequest;
use crate::field::schema::{Decomposition, Field, Kind, Source, ValueType};
use crate::field::state::{Acquired, Attempts, FieldState, FieldUpdate, FieldValue, Provenance};
use crate::field::view;
use crate::tools::bm25::Bm25Index;
use planwright::{NodeContext, NodeError};
use std::collections::BTreeMap;

/// Rule `proactive_decomposition`: the first needed requires-components field without a value or
/// recipe, when no decomposition was generated this tick and its generations remain.
pub fn proactive_decomposition_target(s: &FieldState) -> Option<String> {
    if s.decomposed_at == s.iterations && s.iterations > 0 {
        return None;
    }
    view::missing_inputs(s).into_iter().find(|f| {
        view::field(s, f).is_some_and(|d| d.requires_components)
            && !s.recipes.contains_key(f)
            && !s.schema.decompositions.iter().any(|d| d.field == *f)
            && view::decompositions(s, f) < s.caps.decompositions_per_field
    })
}

/// Checks a generated decomposition of `field`: components named as identifiers, new to the
/// schema, and a formula that parses and uses only its components and raw fields.
pub fn validate_generated(s: &FieldState, field: &str, d: &Decomposition) -> Result<(), String> {
    if d.field != field {
        return Err(format!("decomposes `{}`, not `{field}`", d.field));
    }
    if d.components.is_empty() {
        return Err("has no components".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in &d.components {
        let ok = c.starts_with(|ch: char| ch.is_ascii_alphabetic())
            && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if !ok {
            return Err(format!("component `{c}` is not a valid name"));
        }
        if !seen.insert(c.as_str()) {
            return Err(format!("component `{c}` is listed twice"));
        }
        if c == field || view::field(s, c).is_some() {
            return Err(format!("component `{c}` is not a new field"));
        }
    }
    let expr = formula::parse(&d.formula).map_err(|e| format!("formula: {e}"))?;
    for used in expr.fields() {
        let raw = view::field(s, &used).is_some_and(|f| f.kind == Kind::Raw && used != field);
        if !d.components.contains(&used) && !raw {
            return Err(format!("formula names `{used}`, which is not a component"));
        }
    }
    Ok(())
}

/// The recipe graph: the schema's static decomposition of each requires-components field, else
/// the last generated one.
pub fn recipes_of(s: &FieldState) -> BTreeMap<String, Decomposition> {
    let mut out = BTreeMap::new();
    for f in s.schema.fields.iter().filter(|f| f.requires_components) {
        let found = s
            .schema
            .decompositions
            .iter()
            .find(|d| d.field == f.name)
            .or_else(|| {
                s.dynamic_decompositions
                    .iter()
                    .rev()
                    .find(|d| d.field == f.name)
            });
        if let Some(d) = found {
            out.insert(f.name.clone(), d.clone());
        }
    }
    out
}

/// The running schema's fields: the recipes' components added as raw fields (search first, then
/// ask), each once.
pub fn with_components(s: &FieldState, recipes: &BTreeMap<String, Decomposition>) -> Vec<Field> {
    let mut fields = s.schema.fields.clone();
    for r in recipes.values() {
        for c in &r.components {
            if fields.iter().any(|f| f.name == *c) {
                continue;
            }
            fields.push(Field {
                name: c.clone(),
                kind: Kind::Raw,
                source: Source::Either,
                value_type: r.types.get(c).copied().unwrap_or(ValueType::Number),
                core: false,
                unit: None,
                precision: None,
                description: r.descriptions.get(c).cloned(),
                requires_components: false,
                formula: None,
            });
        }
    }
    fields
}

/// Rule `compose_ready_fields`: the value of every field without one whose recipe's components
/// all have values, and a note for each recipe whose formula fails.
pub fn compose_ready_fields(s: &FieldState) -> (BTreeMap<String, Acquired>, Vec<String>) {
    let mut values = BTreeMap::new();
    let mut notes = Vec::new();
    for (field, r) in &s.recipes {
        if view::has_value(s, field) || !r.components.iter().all(|c| view::has_value(s, c)) {
            continue;
        }
        let known: BTreeMap<String, Option<f64>> = s
            .schema
            .fields
            .iter()
            .map(|f| {
                let v = s.values.get(&f.name).and_then(|a| a.value.number());
                (f.name.clone(), v)
            })
            .collect();
        match formula::evaluate(&r.formula, &known) {
            Ok(v) => {
                values.insert(
                    field.clone(),
                    Acquired {
                        value: FieldValue::Number(v),
                        provenance: Provenance::Composed {
                            formula: r.formula.clone(),
                        },
                    },
                );
            }
            Err(e) => notes.push(format!("composing `{field}` failed: {e}")),
        }
    }
    (values, notes)
}

/// The update that brings recipes, running schema and composed values up to date with `s`.
pub fn refresh(s: &FieldState) -> Result<FieldUpdate, NodeError> {
    let recipes = recipes_of(s);
    let mut u = FieldUpdate::default();
    if recipes != s.recipes {
        let mut schema = s.schema.clone();
        schema.fields = with_components(s, &recipes);
        u = u.recipes(recipes).schema(schema);
    }
    let next = applied(s, &u)?;
    let (values, notes) = compose_ready_fields(&next);
    if !values.is_empty() {
        u = u.values(values);
    }
    if !notes.is_empty() {
        u = u.reflections(notes);
    }
    Ok(u)
}

/// The corpus documents about a field (its description, or its name), best first.
pub fn documents_about(
    s: &FieldState,
    field: &str,
    limit: usize,
) -> Vec<crate::tools::bm25::Document> {
    let query = view::query_variants(s, field).remove(0);
    let index = Bm25Index::from_documents(&s.corpus);
    index
        .search(&query, limit)
        .into_iter()
        .filter_map(|h| s.corpus.get(h.doc).cloned())
        .collect()
}

/// Generates a decomposition of `field` (a model call under memo `key`) and returns the update
/// recording it: the generation counted, the tick marked, and, when it is valid, the decomposition
/// added with recipes and schema refreshed; an invalid or failed one is noted in `reflections`.
pub async fn generate(
    env: &Env,
    s: &FieldState,
    ctx: &NodeContext,
    key: &str,
    field: &str,
) -> StageResult {
    let req = DecomposeRequest {
        goal: s.goal.clone(),
        field: view::field(s, field).cloned(),
        existing: s.schema.fields.iter().map(|f| f.name.clone()).collect(),
        hits: documents_about(s, field, 5),
    };
    let answer = env
        .call(ctx, key, || async { env.policy.decompose(&req).await })
        .await?;
    let mut attempts = s.attempts.get(field).copied().unwrap_or_default();
    attempts.decompositions += 1;
    let mut u = FieldUpdate::default()
        .attempts(BTreeMap::from([(
            field.to_string(),
            Attempts { ..attempts },
        )]))
        .decomposed_at(s.iterations);
    match answer.and_then(|d| validate_generated(s, field, &d).map(|()| d)) {
        Ok(d) => {
            let mut dynamic = s.dynamic_decompositions.clone();
            dynamic.push(d);
            u = u.dynamic_decompositions(dynamic);
            let next = applied(s, &u)?;
            Ok(u.then(refresh(&next)?))
        }
        Err(e) => Ok(u.reflections(vec![format!("decomposition of `{field}` failed: {e}")])),
    }
}

/// The `prepare` node.
pub async fn prepare(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let mut u = FieldUpdate::default();
    let mut next = s.clone();
    if let Some(field) = proactive_decomposition_target(s) {
        u = generate(env, s, ctx, "prepare.decompose", &field).await?;
        next = applied(s, &u)?;
    }
    Ok(u.then(refresh(&next)?))
}
