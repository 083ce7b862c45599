// A chat page on `useStream` against `planwright serve` (assistant `research`): a goal sent as a
// message, the planner's tokens as they stream, the plan-approval interrupt answered from the
// page, the thread kept in the URL (a reload restores it, with its pending interrupt), and the
// past threads listed. The server's API is at `/api` on the page's origin.
import { useCallback, useEffect, useMemo, useState } from "react";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

const apiUrl = `${window.location.origin}/api`;

function urlThread() {
  return new URLSearchParams(window.location.search).get("thread");
}

function setUrlThread(id) {
  const url = new URL(window.location.href);
  if (id) url.searchParams.set("thread", id);
  else url.searchParams.delete("thread");
  window.history.replaceState(null, "", url);
}

// The lengths each streamed message was seen at, for the test: a message that streams is seen
// at several lengths, one that arrives whole at one.
window.__seen = window.__seen ?? {};

function Threads({ client, current, refresh, onPick }) {
  const [threads, setThreads] = useState([]);
  useEffect(() => {
    client.threads
      .search({ limit: 20, sortBy: "created_at", sortOrder: "desc" })
      .then(setThreads, () => setThreads([]));
  }, [client, refresh]);
  return (
    <ul id="threads">
      {threads.map((t) => (
        <li key={t.thread_id} className="thread" data-thread={t.thread_id} data-status={t.status}>
          <button onClick={() => onPick(t.thread_id)} disabled={t.thread_id === current}>
            {t.thread_id} ({t.status})
          </button>
        </li>
      ))}
    </ul>
  );
}

export function App() {
  const client = useMemo(() => new Client({ apiUrl }), []);
  const [threadId, setThreadId] = useState(urlThread);
  const [refresh, setRefresh] = useState(0);
  const [goal, setGoal] = useState("");
  const pick = useCallback((id) => {
    setUrlThread(id);
    setThreadId(id);
  }, []);

  const stream = useStream({
    client,
    assistantId: "research",
    threadId,
    onThreadId: pick,
    onFinish: () => setRefresh((n) => n + 1),
    onError: (e) => console.error("stream error", e),
  });

  const messages = stream.messages;
  useEffect(() => {
    for (const m of messages) {
      const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
      const seen = (window.__seen[m.id] = window.__seen[m.id] ?? []);
      if (seen.at(-1) !== text.length) seen.push(text.length);
    }
  }, [messages]);

  const send = (e) => {
    e.preventDefault();
    if (!goal.trim()) return;
    stream.submit(
      { input: goal, constraints: { max_steps: 4, require_approval: true } },
      { streamMode: ["values", "messages-tuple"] },
    );
    setGoal("");
  };
  const answer = (action) =>
    stream.submit(undefined, {
      command: { resume: { action } },
      streamMode: ["values", "messages-tuple"],
    });

  const values = stream.values ?? {};
  const interrupt = stream.interrupt;
  return (
    <main>
      <h1>Research chat</h1>
      <aside>
        <h2>Threads</h2>
        <button id="new-thread" onClick={() => pick(null)}>
          New thread
        </button>
        <Threads client={client} current={threadId} refresh={refresh} onPick={pick} />
      </aside>
      <section id="chat" data-thread={threadId ?? ""} data-loading={String(stream.isLoading)}>
        {values.goal ? <p id="goal">{values.goal}</p> : null}
        <div id="messages">
          {messages.map((m) => (
            <pre key={m.id} className="message" data-id={m.id}>
              {typeof m.content === "string" ? m.content : JSON.stringify(m.content)}
            </pre>
          ))}
        </div>
        {interrupt ? (
          <div id="interrupt">
            <p className="question">{interrupt.value?.message}</p>
            <ol>
              {(interrupt.value?.plan ?? []).map((s) => (
                <li key={s.id}>{s.description}</li>
              ))}
            </ol>
            {(interrupt.value?.actions ?? ["approve", "deny"])
              .filter((a) => a !== "edit")
              .map((a) => (
                <button key={a} id={`resume-${a}`} onClick={() => answer(a)}>
                  {a}
                </button>
              ))}
          </div>
        ) : null}
        {values.final_report ? <article id="report">{values.final_report}</article> : null}
        {stream.error ? <p id="error">{String(stream.error)}</p> : null}
        <form onSubmit={send}>
          <input id="goal-input" value={goal} onChange={(e) => setGoal(e.target.value)} />
          <button id="send" type="submit" disabled={stream.isLoading}>
            Send
          </button>
        </form>
      </section>
    </main>
  );
}
