// The callwarden console: a page over the service's JSON API. Every value from the server is
// written as text (textContent), never as markup. The token stays in this tab's sessionStorage.
"use strict";

const KEY = "callwarden.token";
const main = document.getElementById("main");
let who = null;          // {role, name, pages} of the token in use
let leave = () => {};    // stops what the current page runs (polling, a stream)
let shown = null;        // the route on screen: a second hashchange to it does not redraw it

// -- helpers ----------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return node;
}

function show(...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined));
}

function notice(text, isError = false) {
  const box = document.getElementById("notice");
  box.textContent = text || "";
  box.hidden = !text;
  box.className = isError ? "error" : "";
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function effect(name) {
  return el("span", {class: `effect effect-${name}`, text: name || ""});
}

function when(value) {
  if (typeof value === "number") return new Date(value * 1000).toISOString().replace(".000", "");
  return value || "";
}

class Failure extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.problems = error.problems || [];
  }
}

async function api(path, {method = "GET", body, signal} = {}) {
  const headers = {Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = (response.headers.get("content-type") || "").startsWith("application/json")
    ? await response.json() : await response.text();
  if (response.status === 401) {
    logout("The token was not accepted; log in again.");
    const failure = new Failure(401, data);
    failure.handled = true;  // the login form says so already
    throw failure;
  }
  if (!response.ok) throw new Failure(response.status, data);
  return data;
}

function fail(error) {
  if (error.name !== "AbortError" && !error.handled) notice(error.message, true);
}

// -- login ------------------------------------------------------------------------------------

function loginPage(message) {
  const input = el("input", {id: "token", type: "password", autocomplete: "off",
                             placeholder: "approver or admin token"});
  const form = el("form", {class: "login", id: "login", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    try {
      await start();
    } catch (error) {
      fail(error);
    }
  }},
  el("h1", {text: "Log in"}),
  el("p", {text: "Give an approver or admin token of this service (its --tokens file)."}),
  input, el("button", {id: "login-button", class: "primary", type: "submit", text: "Log in"}));
  show(form);
  if (message) notice(message, true);
  input.focus();
}

function logout(message) {
  sessionStorage.removeItem(KEY);
  who = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  leave();
  leave = () => {};
  shown = null;
  history.replaceState(null, "", "#/login");  // no hashchange: the form below stays
  loginPage(message);
}

async function start() {
  const me = await api("/v1/whoami");
  if (!me.pages.length) {
    sessionStorage.removeItem(KEY);
    loginPage(`${me.name} holds an ${me.role} token: the console is for approvers and admins.`);
    return;
  }
  who = me;
  notice("");
  document.getElementById("who").textContent = `${me.name} (${me.role})`;
  document.getElementById("logout").hidden = false;
  const nav = document.getElementById("nav");
  nav.hidden = false;
  for (const link of nav.querySelectorAll("a")) link.hidden = !me.pages.includes(link.dataset.page);
  if (!location.hash || location.hash === "#/login") location.hash = "#/approvals";
  else route();
}

// -- approvals --------------------------------------------------------------------------------

// A request's status, with how many of the approvals it needs it has when it needs several.
function quorum(r) {
  if (!(r.required > 1) || r.status !== "pending") return r.status;
  const names = (r.approved_by || []).join(", ");
  return `pending: ${(r.approved_by || []).length} of ${r.required} approvals` +
    (names ? ` (${names})` : "");
}

function approvalsPage() {
  const status = el("select", {id: "status-filter"},
    ...["pending", "approved", "denied", "consumed", "expired", "cancelled", ""].map(
      (s) => el("option", {value: s, text: s || "any"})));
  const session = el("input", {type: "text", id: "session-filter", placeholder: "session"});
  const agent = el("input", {type: "text", id: "agent-filter", placeholder: "agent"});
  const body = el("tbody", {id: "requests"});
  const table = el("table", {},
    el("thead", {}, el("tr", {}, ...["Requested", "Tool", "Agent", "Session", "Rule", "Why",
                                     "Status"].map((h) => el("th", {text: h})))), body);
  const refresh = async () => {
    const query = new URLSearchParams({status: status.value});
    if (session.value) query.set("session", session.value);
    if (agent.value) query.set("agent", agent.value);
    try {
      const {approvals} = await api(`/v1/approvals?${query}`);
      approvals.sort((a, b) => b.created - a.created);
      body.replaceChildren(...approvals.map((r) => el("tr", {
        class: "request", "data-id": r.id, onclick: () => { location.hash = `#/approvals/${r.id}`; },
      }, el("td", {text: when(r.created)}), el("td", {}, el("code", {text: r.tool})),
         el("td", {text: r.agent || ""}), el("td", {text: r.session || ""}),
         el("td", {text: r.rule || ""}), el("td", {text: r.message || ""}),
         el("td", {text: (r.in_doubt ? "IN DOUBT · " : "") + quorum(r)}))));
      if (!approvals.length) {
        body.replaceChildren(el("tr", {}, el("td", {colspan: 7, class: "empty",
                                                    text: "No request here."})));
      }
    } catch (error) {
      fail(error);
    }
  };
  for (const input of [status, session, agent]) input.addEventListener("change", refresh);
  show(el("h1", {text: "Approval requests"}),
       el("div", {class: "filters"}, el("label", {}, "status", status),
          el("label", {}, "session", session), el("label", {}, "agent", agent)),
       table);
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => clearInterval(timer);
}

async function requestPage(id) {
  show(el("p", {class: "empty", text: "Loading…"}));
  const here = location.hash;
  let found;
  try {
    found = await api(`/v1/approvals/${encodeURIComponent(id)}/context`);
  } catch (error) {
    if (location.hash === here) {
      show(el("h1", {text: "Approval request"}), el("p", {class: "error", text: error.message}));
    }
    return;
  }
  if (location.hash !== here) return;  // the person went elsewhere meanwhile
  const r = found.request;
  const comment = el("input", {type: "text", id: "comment", size: 50,
                               placeholder: "comment, or the reason of a denial"});
  const edit = el("textarea", {id: "edit-args"});
  edit.value = json(r.args);
  const result = el("p", {id: "result", role: "status"});
  const answer = async (verb, extra = {}) => {
    const text = comment.value.trim();
    const payload = verb === "approve" ? {comment: text || undefined, ...extra}
                                       : {reason: text || undefined};
    try {
      const done = await api(`/v1/approvals/${encodeURIComponent(id)}/${verb}`,
                             {method: "POST", body: payload});
      result.className = "";
      result.textContent = done.status === "pending"
        ? `${verb === "approve" ? "approved" : "denied"}: ${quorum(done)}`
        : `${done.status} by ${done.resolved_by}`;
      if (done.grant) {
        result.textContent += `; remembered for ${scopeText(done.grant)}` +
          `${done.grant.exact ? ", this exact call" : ""}, until ${when(done.grant.expires)}`;
      } else if (extra.remember && done.status === "pending") {
        result.textContent += "; not remembered: the approval that completes it can remember it";
      }
      for (const button of main.querySelectorAll(".answer")) button.disabled = true;
      document.getElementById("request-status").textContent = quorum(done);
    } catch (error) {
      result.className = "error";
      result.textContent = error.message;
    }
  };
  const pending = r.status === "pending";
  const actions = el("div", {class: "actions"}, comment,
    el("button", {id: "approve", class: "primary answer", disabled: !pending, text: "Approve",
                  onclick: () => answer("approve")}),
    el("button", {id: "deny", class: "danger answer", disabled: !pending, text: "Deny",
                  onclick: () => answer("deny")}));
  // Approve, and don't ask again: a standing grant, narrowest first (this session, this call).
  const scope = el("select", {id: "remember-scope"},
    el("option", {value: "session", disabled: !r.session,
                  text: r.session ? `this session (${r.session})` : "this session (none)"}),
    el("option", {value: "agent", disabled: !r.agent,
                  text: r.agent ? `this agent (${r.agent}), any session` : "this agent (none)"}),
    el("option", {value: "tool", text: "anyone"}));
  scope.value = r.session ? "session" : r.agent ? "agent" : "tool";
  const lasting = el("select", {id: "remember-ttl"}, ...DURATIONS.map(([seconds, label]) =>
    el("option", {value: String(seconds), text: label})));
  lasting.value = "3600";
  const exact = el("input", {type: "checkbox", id: "remember-exact", checked: true});
  const remembering = el("div", {class: "actions", id: "remember"},
    el("label", {}, "remember for ", scope), el("label", {}, "for ", lasting),
    el("label", {}, exact, " this exact call only (these arguments)"),
    el("button", {id: "remember-approve", class: "answer", disabled: !pending,
                  text: "Approve and remember", onclick: () => answer("approve", {remember: {
                    scope: scope.value, ttl: Number(lasting.value), exact: exact.checked}})}));
  const editing = el("details", {id: "edit", open: false},
    el("summary", {text: "Edit the arguments, then approve the edited call"}),
    el("p", {class: "empty", text: "Redacted values left as they are keep their real value."}),
    edit,
    el("div", {class: "actions"}, el("button", {id: "edit-approve", class: "answer",
                                                disabled: !pending,
      text: "Approve the edited call", onclick: () => {
        let args;
        try {
          args = JSON.parse(edit.value);
        } catch (error) {
          result.className = "error";
          result.textContent = `The arguments are not JSON: ${error.message}`;
          return;
        }
        answer("approve", {args});
      }})));
  const history = el("tbody", {id: "history"}, ...found.history.map((e) => el("tr", {},
    el("td", {text: e.time}), el("td", {}, el("code", {text: e.tool})),
    el("td", {}, effect(e.effect)), el("td", {text: e.rule || ""}),
    el("td", {}, el("code", {text: JSON.stringify(e.args)})))));
  if (!found.history.length) {
    history.append(el("tr", {}, el("td", {colspan: 5, class: "empty",
                                         text: "No earlier call of this session is logged."})));
  }
  show(
    el("p", {}, el("a", {href: "#/approvals", text: "← all requests"})),
    el("h1", {}, "Approval request ", el("code", {text: r.id})),
    r.in_doubt ? el("p", {class: "error", id: "request-in-doubt",
                          text: `In doubt: ${r.in_doubt}. Approve it only if it did not happen.`})
               : null,
    el("dl", {},
       el("dt", {text: "Tool"}), el("dd", {}, el("code", {id: "request-tool", text: r.tool})),
       el("dt", {text: "Status"}), el("dd", {id: "request-status", text: quorum(r)}),
       el("dt", {text: "Agent"}), el("dd", {text: r.agent || ""}),
       el("dt", {text: "Principal"}), el("dd", {text: r.principal || ""}),
       el("dt", {text: "Session"}), el("dd", {text: r.session || ""}),
       el("dt", {text: "Rule"}), el("dd", {id: "request-rule", text: r.rule || ""}),
       el("dt", {text: "Why"}), el("dd", {id: "request-message", text: r.message || ""}),
       el("dt", {text: "Source"}), el("dd", {}, el("code", {id: "request-source",
                                                             text: r.source || ""})),
       el("dt", {text: "Source line"}), el("dd", {}, el("code", {id: "source-line",
                                                                  text: found.source_line || ""})),
       el("dt", {text: "Requested"}), el("dd", {text: when(r.created)}),
       el("dt", {text: "Expires"}), el("dd", {text: when(r.expires)}),
       r.resolved_by ? [el("dt", {text: "Resolved by"}), el("dd", {text: r.resolved_by})] : null,
       r.comment ? [el("dt", {text: "Comment"}), el("dd", {text: r.comment})] : null),
    el("h2", {text: "Arguments (secrets redacted)"}), el("pre", {id: "request-args",
                                                              text: json(r.args)}),
    r.edited_args ? [el("h2", {text: "Approved with these arguments"}),
                     el("pre", {text: json(r.edited_args)})] : null,
    actions, remembering, editing, result,
    el("h2", {text: "This session's latest calls"}),
    el("table", {}, el("thead", {}, el("tr", {}, ...["Time", "Tool", "Effect", "Rule",
                                                     "Arguments"].map((h) => el("th", {text: h})))),
       history));
}

// -- standing grants --------------------------------------------------------------------------

const DURATIONS = [[900, "15 minutes"], [3600, "1 hour"], [8 * 3600, "8 hours"],
                   [86400, "1 day"], [7 * 86400, "7 days"]];

// Whom a grant covers.
function scopeText(g) {
  if (g.scope === "session") return `session ${g.session}`;
  if (g.scope === "agent") return `agent ${g.agent}`;
  return "anyone";
}

// What a grant covers: its tool (or glob), and for one exact call the call's arguments, with
// secrets redacted as the server sent them.
function covers(g) {
  const tool = el("code", {text: g.tool});
  if (!g.exact) return [tool, el("span", {class: "empty", text: " any arguments"})];
  if (g.args === null || g.args === undefined) {
    return [tool, el("span", {class: "empty", text: " one exact call (its arguments were " +
                                                    "too long to keep)"})];
  }
  return [tool, " this exact call:", el("pre", {class: "grant-args", text: json(g.args)})];
}

function grantStatus(g) {
  return g.status === "revoked" && g.revoked_by ? `revoked by ${g.revoked_by}` : g.status;
}

function grantsPage() {
  const status = el("select", {id: "grant-status"},
    ...["active", "revoked", "expired", "any"].map((s) => el("option", {value: s, text: s})));
  const session = el("input", {type: "text", id: "grant-session", placeholder: "session"});
  const agent = el("input", {type: "text", id: "grant-agent", placeholder: "agent"});
  const body = el("tbody", {id: "grants"});
  // Revoking asks first, in the row itself (no pop-up): "Yes, revoke" or "Keep it".
  const revoking = (g, cell) => {
    const keep = () => cell.replaceChildren(...revokeButton(g, cell));
    cell.replaceChildren(el("span", {text: "Revoke this grant? "}),
      el("button", {class: "danger confirm-revoke", text: "Yes, revoke", onclick: async () => {
        try {
          const done = await api(`/v1/grants/${encodeURIComponent(g.id)}/revoke`,
                                 {method: "POST"});
          cell.closest("tr").replaceWith(row(done));
          notice(`Revoked grant ${done.id}: the calls it covered are asked again.`);
        } catch (error) {
          cell.replaceChildren(el("span", {class: "error", text: error.message}));
        }
      }}), " ", el("button", {class: "keep", text: "Keep it", onclick: keep}));
  };
  const revokeButton = (g, cell) => g.status === "active"
    ? [el("button", {class: "revoke", text: "Revoke", onclick: () => revoking(g, cell)})] : [];
  const row = (g) => {
    const cell = el("td", {class: "grant-actions"});
    cell.replaceChildren(...revokeButton(g, cell));
    return el("tr", {class: "grant", "data-id": g.id}, el("td", {text: when(g.created)}),
      el("td", {class: "grant-scope", text: scopeText(g)}), el("td", {}, covers(g)),
      el("td", {class: "grant-by", text: g.by}), el("td", {text: when(g.expires)}),
      el("td", {class: "grant-status", text: grantStatus(g)}), cell);
  };
  const refresh = async () => {
    const query = new URLSearchParams({status: status.value});
    if (session.value) query.set("session", session.value);
    if (agent.value) query.set("agent", agent.value);
    try {
      const {grants} = await api(`/v1/grants?${query}`);
      grants.sort((a, b) => b.created - a.created);
      body.replaceChildren(...grants.map(row));
      if (!grants.length) {
        body.replaceChildren(el("tr", {}, el("td", {colspan: 7, class: "empty",
                                                    text: "No grant here."})));
      }
    } catch (error) {
      fail(error);
    }
  };
  for (const input of [status, session, agent]) input.addEventListener("change", refresh);
  show(el("h1", {text: "Standing grants"}),
       el("p", {class: "empty", text: "Approvals remembered so that the calls they cover are " +
                                       "not asked again, until they expire or are revoked."}),
       el("div", {class: "filters"}, el("label", {}, "status", status),
          el("label", {}, "session", session), el("label", {}, "agent", agent),
          el("button", {type: "button", id: "grant-refresh", text: "Refresh",
                        onclick: refresh})),
       el("table", {}, el("thead", {}, el("tr", {}, ...["Granted", "For", "Covers", "By",
         "Expires", "Status", ""].map((h) => el("th", {text: h})))), body));
  refresh();
}

// -- live decisions ---------------------------------------------------------------------------

const streamFilters = {tool: "", session: ""};  // kept while the page is followed again

function streamPage() {
  const controller = new AbortController();
  const body = el("tbody", {id: "stream"});
  const state = el("p", {id: "stream-state", class: "empty", text: "Connecting…"});
  const tool = el("input", {type: "text", id: "stream-tool", placeholder: "tool"});
  const session = el("input", {type: "text", id: "stream-session", placeholder: "session"});
  tool.value = streamFilters.tool;
  session.value = streamFilters.session;
  const row = (e) => el("tr", {class: "event"}, el("td", {text: e.time}),
    el("td", {}, el("code", {text: e.tool || ""})), el("td", {}, effect(e.effect)),
    el("td", {text: e.rule || ""}), el("td", {text: e.agent || ""}),
    el("td", {text: e.session || ""}), el("td", {text: e.message || ""}));
  const follow = async () => {
    const query = new URLSearchParams({type: "decision"});
    if (streamFilters.tool) query.set("tool", streamFilters.tool);
    if (streamFilters.session) query.set("session", streamFilters.session);
    try {
      const response = await fetch(`/v1/audit/stream?${query}`, {
        headers: {Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`},
        signal: controller.signal,
      });
      if (!response.ok) throw new Failure(response.status, await response.json());
      state.textContent = "Following new decisions as they are made.";
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        const blocks = buffer.split("\n\n");
        buffer = blocks.pop();
        for (const block of blocks) {
          const data = block.split("\n").filter((l) => l.startsWith("data: "))
            .map((l) => l.slice(6)).join("\n");
          if (!data) continue;
          body.prepend(row(JSON.parse(data)));
          while (body.children.length > 500) body.lastChild.remove();
        }
      }
      state.textContent = "The stream ended; reload the page to follow again.";
    } catch (error) {
      if (error.name !== "AbortError") {
        state.className = "error";
        state.textContent = error.message;
      }
    }
  };
  show(el("h1", {text: "Live decisions"}),
       el("div", {class: "filters"}, el("label", {}, "tool", tool),
          el("label", {}, "session", session),
          el("button", {type: "button", id: "stream-apply", text: "Apply", onclick: () => {
            streamFilters.tool = tool.value.trim();
            streamFilters.session = session.value.trim();
            route();  // follow again with these filters
          }})),
       state,
       el("table", {}, el("thead", {}, el("tr", {}, ...["Time", "Tool", "Effect", "Rule",
         "Agent", "Session", "Message"].map((h) => el("th", {text: h})))), body));
  follow();
  return () => controller.abort();
}

// -- audit search -----------------------------------------------------------------------------

const FIELDS = ["type", "session", "tool", "effect", "rule", "agent", "since", "until", "limit"];

function auditPage() {
  const inputs = Object.fromEntries(FIELDS.map((f) => [f, f === "effect"
    ? el("select", {id: `audit-${f}`}, ...["", "allow", "modify", "deny", "ask", "halt"].map(
        (v) => el("option", {value: v, text: v || "any"})))
    : el("input", {type: "text", id: `audit-${f}`, size: f === "limit" ? 5 : 14,
                   placeholder: {since: "ISO time or epoch", until: "ISO time or epoch",
                                 limit: "100", type: "decision"}[f] || ""})]));
  const results = el("tbody", {id: "audit-results"});
  const count = el("p", {id: "audit-count", class: "empty"});
  const search = async (event) => {
    if (event) event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, input] of Object.entries(inputs)) {
      if (input.value.trim()) query.set(name, input.value.trim());
    }
    try {
      const {events} = await api(`/v1/audit/events?${query}`);
      events.reverse();
      count.textContent = `${events.length} event${events.length === 1 ? "" : "s"}, newest first`;
      results.replaceChildren(...events.map((e) => el("tr", {class: "event"},
        el("td", {text: e.time}), el("td", {text: e.type}),
        el("td", {}, el("code", {text: e.tool || ""})), el("td", {}, effect(e.effect)),
        el("td", {text: e.rule || ""}), el("td", {text: e.agent || ""}),
        el("td", {text: e.session || ""}),
        el("td", {}, el("code", {text: e.args === undefined ? "" : JSON.stringify(e.args)})))));
    } catch (error) {
      count.className = "error";
      count.textContent = error.message;
    }
  };
  show(el("h1", {text: "Audit search"}),
       el("form", {class: "filters", id: "audit-form", onsubmit: search},
          ...FIELDS.map((f) => el("label", {}, f, inputs[f])),
          el("button", {id: "audit-search", class: "primary", type: "submit", text: "Search"})),
       count,
       el("table", {}, el("thead", {}, el("tr", {}, ...["Time", "Type", "Tool", "Effect", "Rule",
         "Agent", "Session", "Arguments"].map((h) => el("th", {text: h})))), results));
  search();
}

// -- replay -----------------------------------------------------------------------------------

function replayPage() {
  const pick = el("select", {id: "policy-pick"});
  const text = el("textarea", {id: "policy-text", spellcheck: "false",
                               placeholder: "the candidate policy (YAML)"});
  const file = el("input", {type: "file", id: "policy-file", accept: ".yaml,.yml,text/yaml"});
  const out = el("div", {id: "replay-result"});
  const load = async () => {
    if (!pick.value) return;
    try {
      text.value = (await api(`/v1/policies/${encodeURIComponent(pick.value)}`)).text;
    } catch (error) {
      fail(error);
    }
  };
  pick.addEventListener("change", load);
  file.addEventListener("change", async () => {
    if (file.files.length) text.value = await file.files[0].text();
  });
  const run = async () => {
    out.replaceChildren(el("p", {class: "empty", text: "Replaying…"}));
    try {
      out.replaceChildren(...report(await api("/v1/replay", {method: "POST",
                                                              body: {policy: text.value}})));
    } catch (error) {
      out.replaceChildren(el("p", {class: "error", id: "replay-error", text: error.message}),
                          el("ul", {id: "replay-problems"},
                             ...error.problems.map((p) => el("li", {text: p}))));
    }
  };
  show(el("h1", {text: "Replay a policy over the audit log"}),
       el("p", {class: "empty", text: "Pick a policy file beside the served one, or upload " +
                                       "one, edit it here, and see which logged decisions it " +
                                       "would change. Nothing is enforced."}),
       el("div", {class: "filters"}, el("label", {}, "policy file", pick),
          el("label", {}, "or upload", file)),
       text,
       el("div", {class: "actions"}, el("button", {id: "replay", class: "primary",
                                                   text: "Replay", onclick: run})),
       out);
  api("/v1/policies").then(({policies}) => {
    pick.replaceChildren(...policies.map((p) => el("option", {
      value: p.name, text: p.current ? `${p.name} (served)` : p.name})));
    const current = policies.find((p) => p.current);
    if (current) pick.value = current.name;
    load();
  }, fail);
}

function report(r) {
  const parts = [el("p", {id: "replay-summary", text: `Replayed ${r.decisions} decisions with ` +
    `${r.policy}: ${r.changed} would change` + (r.rule_changed
      ? `, ${r.rule_changed} decided by another rule with the same effect.` : ".")})];
  const transitions = Object.entries(r.transitions);
  if (transitions.length) {
    parts.push(el("h2", {text: "Changes by effect"}), el("table", {id: "replay-transitions"},
      el("tbody", {}, ...transitions.map(([t, n]) => el("tr", {}, el("td", {text: t}),
                                                       el("td", {text: n}))))));
  }
  if (r.changes.length) {
    parts.push(el("h2", {text: "Changed calls"}), el("table", {id: "replay-changes"},
      el("thead", {}, el("tr", {}, ...["Time", "Tool", "Session", "Change", "Rule now", "Rule before",
                                       "Arguments"].map((h) => el("th", {text: h})))),
      el("tbody", {}, ...r.changes.map((c) => el("tr", {}, el("td", {text: c.time}),
        el("td", {}, el("code", {text: c.tool})), el("td", {text: c.session || ""}),
        el("td", {}, effect(c.old_effect), " → ", effect(c.new_effect)),
        el("td", {text: c.new_rule || "default"}), el("td", {text: c.old_rule || "default"}),
        el("td", {}, el("code", {text: JSON.stringify(c.args)})))))));
  }
  return parts;
}

// -- routing ----------------------------------------------------------------------------------

function route() {
  leave();
  leave = () => {};
  notice("");
  shown = who ? location.hash : null;
  if (!who) {
    loginPage();
    return;
  }
  const [, page, id] = location.hash.split("/");
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.dataset.page === page);
  }
  if (!who.pages.includes(page)) {
    show(el("h1", {text: "Not for this token"}),
         el("p", {text: `A ${who.role} token does not open this page.`}));
    return;
  }
  const pages = {approvals: () => (id ? requestPage(decodeURIComponent(id)) : approvalsPage()),
                 grants: grantsPage, stream: streamPage, audit: auditPage, replay: replayPage};
  const stop = pages[page]();
  if (typeof stop === "function") leave = stop;
}

// Two hash changes can land on one route (logging in sends to #/approvals while a link is being
// followed): the page drawn for the first keeps what the person typed into it since.
window.addEventListener("hashchange", () => { if (location.hash !== shown) route(); });
document.getElementById("logout").addEventListener("click", () => logout());
if (sessionStorage.getItem(KEY)) start().catch(fail);
else loginPage();
