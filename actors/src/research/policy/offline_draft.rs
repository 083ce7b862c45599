//! Drafting a plan offline: the goal's topic, the sections a plan covers, a `search` step per
//! section, and the first draft — shared by the offline policy's `create_plan` and its repair and
//! replan (see `offline`).

use super::PlanRequest;
use crate::research::constraints::Constraints;
use crate::research::notes::Note;
use crate::research::state::{Criterion, PlanStep, StepParams, StepStatus};
use crate::research::text;
use crate::tools::bm25;
use crate::tools::mcp::{choose, ToolInfo};
use std::sync::Arc;

/// The section name of a search step without a topic of its own.
pub const OVERVIEW: &str = "overview";

/// The goal's topic terms, without the words of the sections.
pub fn goal_topic(goal: &str, sections: &[String]) -> Vec<String> {
    let section_terms: Vec<String> = sections
        .iter()
        .flat_map(|s| text::content_terms(s))
        .collect();
    let topic: Vec<String> = text::topic_terms(goal)
        .into_iter()
        .filter(|t| !section_terms.iter().any(|s| text::stem(s) == text::stem(t)))
        .collect();
    if topic.is_empty() {
        text::content_terms(goal)
    } else {
        topic
    }
}

/// Sub-questions of the goal: the required sections, else the two tags most common among the
/// notes on the goal's topic, else an overview.
pub fn sections_for(goal: &str, constraints: &Constraints, notes: &[Note]) -> Vec<String> {
    if !constraints.required_sections.is_empty() {
        return constraints.required_sections.clone();
    }
    let topic = text::topic_terms(goal);
    let hits = bm25::rank_once(
        notes.iter().map(|n| (&*n.title, &*n.text)),
        &topic.join(" "),
        8,
    );
    let top = hits.first().map_or(0.0, |h| h.score);
    let mut counts: Vec<(String, usize)> = Vec::new();
    for hit in hits.iter().filter(|h| h.score >= top * 0.2) {
        let note = &notes[hit.doc];
        if !topic.iter().any(|t| note.mentions(t)) {
            continue;
        }
        for tag in note.tags.iter() {
            let tag_terms = text::content_terms(tag);
            let is_topic = tag_terms
                .iter()
                .all(|w| topic.iter().any(|t| text::stem(t) == text::stem(w)));
            if is_topic || tag_terms.is_empty() {
                continue;
            }
            match counts.iter_mut().find(|(t, _)| t == tag) {
                Some((_, n)) => *n += 1,
                None => counts.push((tag.clone(), 1)),
            }
        }
    }
    // Stable sort: ties keep first-seen order.
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let picked: Vec<String> = counts
        .into_iter()
        .filter(|(_, n)| *n >= 2)
        .take(2)
        .map(|(t, _)| t)
        .collect();
    if picked.is_empty() {
        vec![OVERVIEW.to_string()]
    } else {
        picked
    }
}

/// A search step for one section.
pub fn search_step(id: String, section: &str, topic: &[String], min_sources: u32) -> PlanStep {
    let overview = section == OVERVIEW;
    let topic_phrase = topic.join(" ");
    let query = if overview {
        topic_phrase.clone()
    } else {
        format!("{topic_phrase} {section}")
    };
    let mut criteria = vec![Criterion::MinSources(min_sources)];
    if !overview {
        criteria.push(Criterion::Covers(vec![section.to_string()]));
    }
    PlanStep {
        id,
        description: if overview {
            format!("Find notes giving an overview of {topic_phrase}")
        } else {
            format!("Find notes on {section} for {topic_phrase}")
        },
        depends_on: Vec::new(),
        tool: "search".into(),
        params: Arc::new(StepParams {
            aspect: (!overview).then(|| section.to_string()),
            query: Some(query),
            require_any: topic.to_vec(),
            ..StepParams::default()
        }),
        acceptance_criteria: criteria.into(),
        optional: false,
        status: StepStatus::Pending,
    }
}

/// An `mcp` step for one section, when a tool server's tool fits it: the tool whose description
/// best matches the section and the goal's topic (`tools::mcp::choose`), called with a query of
/// both. The step is optional: a tool that fails or finds nothing on the section is a reported
/// gap, and the notes' searches still make the brief.
pub fn tool_step(
    id: String,
    section: &str,
    topic: &[String],
    tools: &[ToolInfo],
) -> Option<PlanStep> {
    if tools.is_empty() {
        return None;
    }
    let overview = section == OVERVIEW;
    let topic_phrase = topic.join(" ");
    let query = if overview {
        topic_phrase.clone()
    } else {
        format!("{topic_phrase} {section}")
    };
    // The section decides (a tool about the topic in general does not answer a section).
    let question = if overview {
        query.clone()
    } else {
        section.to_string()
    };
    let choice = choose(tools, &question, &query)?;
    let mut criteria = vec![Criterion::MinSources(1)];
    if !overview {
        criteria.push(Criterion::Covers(vec![section.to_string()]));
    }
    Some(PlanStep {
        id,
        description: format!(
            "Ask {}/{} about {} (its description fits)",
            choice.server,
            choice.tool,
            if overview { &topic_phrase } else { section }
        ),
        depends_on: Vec::new(),
        tool: "mcp".into(),
        params: Arc::new(StepParams {
            aspect: (!overview).then(|| section.to_string()),
            query: Some(query),
            server: Some(choice.server),
            tool: Some(choice.tool),
            arguments: Some(choice.arguments),
            ..StepParams::default()
        }),
        acceptance_criteria: criteria.into(),
        optional: true,
        status: StepStatus::Pending,
    })
}

/// The first plan for a goal.
pub fn draft_plan(req: &PlanRequest) -> Vec<PlanStep> {
    let c = &req.constraints;
    let sections = sections_for(&req.goal, c, &req.notes);
    let topic = goal_topic(&req.goal, &sections);
    let mut plan: Vec<PlanStep> = sections
        .iter()
        .enumerate()
        .map(|(i, s)| search_step(format!("step_{}", i + 1), s, &topic, c.min_sources))
        .collect();
    let searches: Vec<String> = plan.iter().map(|s| s.id.clone()).collect();
    if c.allows("mcp") {
        for s in &sections {
            let id = format!("step_{}", plan.len() + 1);
            plan.extend(tool_step(id, s, &topic, &req.tools));
        }
    }
    let dimensions: Vec<String> = if !c.dimensions.is_empty() {
        c.dimensions.clone()
    } else if sections.len() >= 2 {
        sections.clone()
    } else {
        Vec::new()
    };
    let mut last = searches.clone();
    if !dimensions.is_empty() && c.allows("compare") {
        let id = format!("step_{}", plan.len() + 1);
        plan.push(PlanStep {
            id: id.clone(),
            description: format!("Compare the findings along {}", dimensions.join(", ")),
            depends_on: searches.clone(),
            tool: "compare".into(),
            params: Arc::new(StepParams {
                dimensions: dimensions.clone(),
                ..StepParams::default()
            }),
            acceptance_criteria: vec![Criterion::Covers(dimensions)].into(),
            optional: false,
            status: StepStatus::Pending,
        });
        last = vec![id];
    }
    if c.allows("summarize") {
        plan.push(PlanStep {
            id: format!("step_{}", plan.len() + 1),
            description: "Summarize the most relevant findings".into(),
            depends_on: last,
            tool: "summarize".into(),
            params: Default::default(),
            acceptance_criteria: vec![Criterion::MinSources(c.min_sources.min(2))].into(),
            optional: false,
            status: StepStatus::Pending,
        });
    }
    plan
}
