//! The action nodes: `search` (BM25 over the corpus), `observe` (the model extracts the value from
//! the hits; the quote is checked against the document), `calculate` (the calculator), `reflect`
//! (a model note) and `finish` (the final status).

use super::{Env, StageResult};
use crate::field::numbers::readings;
use crate::field::policy::{ExtractRequest, ReflectRequest};
use crate::field::schema::ValueType;
use crate::field::state::{
    inputs_fingerprint, Acquired, Attempts, Calculation, FieldState, FieldUpdate, FieldValue,
    Observation, Provenance, SearchRecord, Status,
};
use crate::field::{calculator, view};
use crate::tools::bm25::Bm25Index;
use planwright::NodeContext;
use std::collections::BTreeMap;

/// Hits a search keeps.
pub const SEARCH_LIMIT: usize = 3;

/// The `search` node: runs the decision's query, records it, and leaves the hits for `observe`
/// (none: `last_observation` stays empty and the run goes back to `tick`).
pub async fn search(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let Some(d) = &s.decision else {
        return Ok(FieldUpdate::default().last_observation(None));
    };
    let field = d.target.clone().unwrap_or_default();
    let query = d
        .query
        .clone()
        .unwrap_or_else(|| view::default_query(s, &field));
    let index = Bm25Index::from_documents(&s.corpus);
    let mut hits: Vec<_> = index
        .search(&query, SEARCH_LIMIT)
        .into_iter()
        .filter_map(|h| s.corpus.get(h.doc).cloned())
        .collect();
    if let Some(mcp) = &env.mcp {
        hits.extend(tool_document(mcp, &field, &query, ctx).await);
    }
    let mut attempts = s.attempts.get(&field).copied().unwrap_or_default();
    attempts.searches += 1;
    Ok(FieldUpdate::default()
        .attempts(BTreeMap::from([(field.clone(), attempts)]))
        .search_history(vec![SearchRecord {
            field: field.clone(),
            query: view::normalise_query(&query),
        }])
        .last_observation((!hits.is_empty()).then_some(Observation { field, query, hits })))
}

/// The result of the tool whose description fits `query` (`tools::mcp::choose`), called with
/// it, as a document: id `server:tool:field`, title `server/tool(arguments)`, the returned text.
/// The observation then reads it like a corpus document, under the same rules (the quote verbatim
/// in it, the value following from the span), and the value's provenance names the tool's id.
/// A tool that fails (a timeout after its retries, an error, garbage) gives no document: the
/// search has the corpus's hits only, and the failure is a `tool_error` event.
async fn tool_document(
    mcp: &crate::tools::mcp::McpTools,
    field: &str,
    query: &str,
    ctx: &NodeContext,
) -> Option<crate::tools::bm25::Document> {
    let choice = crate::tools::mcp::choose(mcp.tools(), query, query)?;
    let cancel = std::pin::pin!(ctx.cancelled());
    match mcp
        .call(
            &choice.server,
            &choice.tool,
            choice.arguments.clone(),
            cancel,
        )
        .await
    {
        Ok(content) => Some(crate::tools::bm25::Document {
            id: crate::tools::mcp::citation_id(&choice.server, &choice.tool, field),
            title: format!(
                "{}/{}({})",
                choice.server,
                choice.tool,
                serde_json::Value::Object(choice.arguments)
            ),
            text: content.text,
        }),
        Err(e) => {
            ctx.emit(serde_json::json!({"tool_error": {"field": field, "error": e.to_string()}}));
            None
        }
    }
}

/// Values already attributed to fields from search, as (document id, value).
fn taken(s: &FieldState) -> Vec<(String, f64)> {
    s.values
        .values()
        .filter_map(|a| match (&a.provenance, a.value.number()) {
            (Provenance::Search { source_id, .. }, Some(v)) => Some((source_id.clone(), v)),
            _ => None,
        })
        .collect()
}

/// Checks an extraction: from a hit, quote verbatim in that document, a value of the field's type
/// that the quote states.
pub fn check_extraction(
    s: &FieldState,
    obs: &Observation,
    e: &crate::field::policy::Extraction,
) -> Result<(), String> {
    let doc = obs
        .hits
        .iter()
        .find(|d| d.id == e.source_id)
        .ok_or_else(|| format!("document `{}` was not among the hits", e.source_id))?;
    if e.quote.trim().is_empty() || !doc.text.contains(&e.quote) {
        return Err(format!("the quote is not in document `{}`", doc.id));
    }
    if !e.value.is_finite() {
        return Err("the value is not a finite number".into());
    }
    let ty = view::field(s, &obs.field).map_or(ValueType::Number, |f| f.value_type);
    if ty == ValueType::Ratio && !(0.0..=1.0).contains(&e.value) {
        return Err(format!("{} is not a ratio between 0 and 1", e.value));
    }
    if e.value < 0.0 {
        return Err(format!("{} is negative", e.value));
    }
    match &e.span {
        // A reading: the span is in the quote, and the value follows from it by the conversions.
        Some(span) => crate::field::reading::verify(
            &e.quote,
            &crate::field::reading::FieldReading {
                value: e.value,
                span: span.clone(),
                conversions: e.conversions.clone(),
            },
        )?,
        None if !e.conversions.is_empty() => {
            return Err("conversions are given without the span they apply to".into())
        }
        None => {
            let stated = readings(&e.quote, ty)
                .iter()
                .any(|r| (r.value - e.value).abs() <= 1e-9 * e.value.abs().max(1.0));
            if !stated {
                return Err(format!("the quote does not state {}", e.value));
            }
        }
    }
    Ok(())
}

/// The `observe` node: the model extracts the searched field's value from the hits.
pub async fn observe(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let Some(obs) = &s.last_observation else {
        return Ok(FieldUpdate::default());
    };
    let req = ExtractRequest {
        field: view::field(s, &obs.field).cloned(),
        hits: obs.hits.clone(),
        taken: taken(s),
        currency: text_value(s, "currency"),
        region: text_value(s, "region"),
        rates: corpus_rates(s),
        about: format!("{} {}", s.schema.name, s.goal),
    };
    let answer = env
        .call(ctx, "extract", || async { env.policy.extract(&req).await })
        .await?;
    let u = FieldUpdate::default().last_observation(None);
    Ok(match answer {
        Ok(a) => match (a.found, a.ask) {
            (Some(e), _) => match check_extraction(s, obs, &e) {
                Ok(()) => u.values(BTreeMap::from([(
                    obs.field.clone(),
                    Acquired {
                        value: FieldValue::Number(e.value),
                        provenance: Provenance::Search {
                            source_id: e.source_id,
                            quote: e.quote,
                            span: e.span,
                            conversions: e.conversions,
                            confirmed: None,
                        },
                    },
                )])),
                Err(why) => u.reflections(vec![format!(
                    "extraction for `{}` rejected: {why}",
                    obs.field
                )]),
            },
            (None, Some(c)) => ask_between(s, &obs.field, u, &c),
            (None, None) => u.reflections(vec![format!(
                "no value for `{}` in the hits of \"{}\"",
                obs.field, obs.query
            )]),
        },
        Err(e) => u.reflections(vec![format!("extraction for `{}` failed: {e}", obs.field)]),
    })
}

/// The exchange rates the corpus states (the person's own among them, as `user-rates`).
pub fn corpus_rates(s: &FieldState) -> Vec<(String, String, f64, String)> {
    crate::field::reading::context::rates(s.corpus.iter().map(|d| (d.id.as_str(), d.text.as_str())))
}

/// A text field's value (`region`, `currency`).
pub fn text_value(s: &FieldState, name: &str) -> Option<String> {
    s.values.get(name).and_then(|a| match &a.value {
        FieldValue::Text(t) => Some(t.clone()),
        FieldValue::Number(_) => None,
    })
}

/// A figure the person must settle (several candidates, or one whose currency or rate is open):
/// keeps it as the field's finding and asks at once, with the source, the quote and the value
/// as read; with no question left to ask, leaves the field unknown and says why.
fn ask_between(
    s: &FieldState,
    field: &str,
    u: FieldUpdate,
    c: &crate::field::policy::Candidates,
) -> FieldUpdate {
    let note = format!(
        "`{field}`: {} in {} \"{}\": {}",
        c.why,
        c.source_id,
        c.quote,
        c.options()
    );
    if view::can_ask(s, field) && !view::has_value(s, field) {
        let question = c.question(&view::default_question(s, field));
        u.reflections(vec![format!("asking: {note}")])
            .findings(BTreeMap::from([(field.to_string(), c.clone())]))
            .reask(Some(crate::field::state::Question {
                field: field.to_string(),
                question,
            }))
    } else {
        u.reflections(vec![format!("left unknown, nobody to ask: {note}")])
    }
}

/// The calculator's verdict on the current values: blocked on missing inputs, a failing formula,
/// or every derived field computed.
pub fn calculate_values(s: &FieldState) -> Calculation {
    let missing = view::missing_inputs(s);
    if !missing.is_empty() {
        return Calculation::Blocked { missing };
    }
    let eval = calculator::evaluate(s);
    // A failing formula matters only if the targets need it.
    let needed = view::needed_derived(s);
    if let Some((_, reason)) = eval.errors.into_iter().find(|(f, _)| needed.contains(f)) {
        return Calculation::Error { reason };
    }
    let uncomputable: Vec<String> = s
        .schema
        .targets
        .iter()
        .filter(|t| !eval.values.contains_key(*t) && !view::has_value(s, t))
        .cloned()
        .collect();
    if !uncomputable.is_empty() {
        return Calculation::Error {
            reason: format!(
                "targets not computable from the values: {}",
                uncomputable.join(", ")
            ),
        };
    }
    Calculation::Success {
        values: eval.values,
        inputs_fingerprint: inputs_fingerprint(s),
    }
}

/// The `calculate` node.
pub async fn calculate(_env: &Env, s: &FieldState, _ctx: &NodeContext) -> StageResult {
    let calc = calculate_values(s);
    let mut u = FieldUpdate::default().calc_attempts(s.calc_attempts + 1);
    if let Calculation::Success { values, .. } = &calc {
        let derived: BTreeMap<String, Acquired> = values
            .iter()
            .map(|(name, v)| {
                let formula = view::field(s, name)
                    .and_then(|f| f.formula.clone())
                    .unwrap_or_default();
                (
                    name.clone(),
                    Acquired {
                        value: FieldValue::Number(*v),
                        provenance: Provenance::Calculated { formula },
                    },
                )
            })
            .collect();
        u = u.values(derived);
    }
    Ok(u.calculation(calc))
}

/// The `reflect` node.
pub async fn reflect(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let req = ReflectRequest {
        goal: s.goal.clone(),
        missing: view::missing_inputs(s),
        attempts: s.attempts.clone(),
        recent_decisions: s.decisions.iter().rev().take(5).rev().cloned().collect(),
    };
    let answer = env
        .call(ctx, "reflect", || async { env.policy.reflect(&req).await })
        .await?;
    let note = match answer {
        Ok(r) => r.note,
        Err(e) => format!("reflection failed: {e}"),
    };
    Ok(FieldUpdate::default().reflections(vec![note]))
}

/// The `finish` node: `ok` when every target is calculated from the current inputs, else
/// `aborted`.
pub async fn finish(_env: &Env, s: &FieldState, _ctx: &NodeContext) -> StageResult {
    let status = if s.status != Status::Aborted && view::calculation_current(s) {
        Status::Ok
    } else {
        Status::Aborted
    };
    Ok(FieldUpdate::default().status(status))
}

/// Attempts with one more question for `field`.
pub fn one_more_ask(s: &FieldState, field: &str) -> BTreeMap<String, Attempts> {
    let mut a = s.attempts.get(field).copied().unwrap_or_default();
    a.asks += 1;
    BTreeMap::from([(field.to_string(), a)])
}
