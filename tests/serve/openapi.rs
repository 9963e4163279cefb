//! Issue 45 item 9, the callers' contract: `docs/openapi.json`.
//!
//! - Its payload types are generated from `schemas/` (the HCP envelope, the
//!   five message payloads, seed 004's `job_status`), not copied by hand:
//!   [`openapi_schemas_are_generated_from_schemas_dir`] regenerates them and
//!   compares; `BLESS=1` writes them into the document.
//! - The document is valid OpenAPI 3.1 ([`openapi_document_is_valid_openapi_3_1`]):
//!   a structural check of the objects the specification defines (no copy
//!   of the OpenAPI meta-schema is available offline), every schema valid
//!   JSON Schema 2020-12, every `$ref` resolved, every path parameter
//!   declared; and every example in it validates against its schema.
//! - Its paths are the router's routes, and so are the rows of the endpoint
//!   table in `docs/calling.md` ([`documented_endpoints_are_the_routers_routes`]).

use hcp_contracts::schema::SchemaId;
use hcp_tests::REPO_ROOT;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(REPO_ROOT).join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn document() -> Value {
    serde_json::from_str(&read("docs/openapi.json")).expect("docs/openapi.json is JSON")
}

/// The schemas of `schemas/` embedded in the document, by component name.
const FROM_SCHEMAS: &[(&str, SchemaId)] = &[
    ("Envelope", SchemaId::Envelope),
    ("TaskSubmitPayload", SchemaId::TaskSubmit),
    ("TaskAcceptedPayload", SchemaId::TaskAccepted),
    ("TaskRejectedPayload", SchemaId::TaskRejected),
    ("TaskCompletedPayload", SchemaId::TaskCompleted),
    ("TaskFailedPayload", SchemaId::TaskFailed),
    ("JobStatus", SchemaId::JobStatus),
];

/// The HCP messages: component name, `type`, payload component.
const MESSAGES: &[(&str, &str, &str)] = &[
    ("TaskSubmit", "task_submit", "TaskSubmitPayload"),
    ("TaskAccepted", "task_accepted", "TaskAcceptedPayload"),
    ("TaskRejected", "task_rejected", "TaskRejectedPayload"),
    ("TaskCompleted", "task_completed", "TaskCompletedPayload"),
    ("TaskFailed", "task_failed", "TaskFailedPayload"),
];

fn generated_comment(source: &str) -> String {
    format!("Generated from {source} by tests/serve/openapi.rs (BLESS=1); do not edit here.")
}

/// A schema of `schemas/` as a component: without `$schema` and `$id`
/// (the document is the resource), its references rewritten to the
/// components (`#/$defs/x` of its own, `other.schema.json#/$defs/x` of
/// another embedded file).
fn component_of(name: &str, id: SchemaId) -> Value {
    let mut schema = id.document().clone();
    let object = schema.as_object_mut().expect("a schema object");
    object.remove("$schema");
    object.remove("$id");
    let mut with_comment = Map::new();
    with_comment.insert(
        "$comment".to_owned(),
        json!(generated_comment(&format!("schemas/{}", id.file()))),
    );
    with_comment.extend(std::mem::take(object));
    let mut schema = Value::Object(with_comment);
    let dir = Path::new(id.file()).parent().expect("a directory");
    rewrite_refs(&mut schema, &|reference: &str| {
        let (file, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let target = if file.is_empty() {
            name
        } else {
            let file = dir.join(file);
            FROM_SCHEMAS
                .iter()
                .find(|(_, id)| Path::new(id.file()) == file)
                .map(|(n, _)| *n)
                .unwrap_or_else(|| panic!("{name}: $ref {reference} names no embedded schema"))
        };
        format!("#/components/schemas/{target}{fragment}")
    });
    schema
}

fn rewrite_refs(value: &mut Value, to: &dyn Fn(&str) -> String) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "$ref" => *s = to(s),
                    _ => rewrite_refs(v, to),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, to)),
        _ => {}
    }
}

/// The valid fixtures of `schemas/fixtures/hcp/<type>`, sorted by name: the
/// examples of a message.
fn fixtures(kind: &str) -> Vec<Value> {
    let dir = Path::new(REPO_ROOT)
        .join("schemas/fixtures/hcp")
        .join(kind)
        .join("valid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("fixture")).expect("json"))
        .collect()
}

/// Every generated component, by name.
fn generated() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = FROM_SCHEMAS
        .iter()
        .map(|(name, id)| ((*name).to_owned(), component_of(name, *id)))
        .collect();
    for (name, kind, payload) in MESSAGES {
        out.push((
            (*name).to_owned(),
            json!({
                "$comment": generated_comment(&format!(
                    "schemas/hcp/envelope.schema.json, schemas/hcp/{kind}.payload.schema.json \
                     and the examples of schemas/fixtures/hcp/{kind}/valid"
                )),
                "description": format!("An HCP `{kind}` message: the envelope with its payload."),
                "allOf": [{"$ref": "#/components/schemas/Envelope"}],
                "properties": {
                    "type": {"const": kind},
                    "payload": {"$ref": format!("#/components/schemas/{payload}")}
                },
                "examples": fixtures(kind),
            }),
        ));
    }
    out.push((
        "Message".to_owned(),
        json!({
            "$comment": generated_comment("schemas/hcp"),
            "description": "An HCP message (schemas/hcp/envelope.schema.json), typed by its `type`.",
            "oneOf": MESSAGES
                .iter()
                .map(|(name, _, _)| json!({"$ref": format!("#/components/schemas/{name}")}))
                .collect::<Vec<_>>(),
        }),
    ));
    out
}

fn pretty(doc: &Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).expect("serialize");
    text.push('\n');
    text
}

#[test]
fn openapi_schemas_are_generated_from_schemas_dir() {
    let kept = read("docs/openapi.json");
    let mut doc: Value = serde_json::from_str(&kept).expect("json");
    let schemas = doc["components"]["schemas"]
        .as_object_mut()
        .expect("components.schemas");
    for (name, schema) in generated() {
        schemas.insert(name, schema);
    }
    let expected = pretty(&doc);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(Path::new(REPO_ROOT).join("docs/openapi.json"), &expected)
            .expect("write docs/openapi.json");
        return;
    }
    assert!(
        kept == expected,
        "docs/openapi.json differs from its schemas/ (BLESS=1 rewrites the generated components)"
    );
}

/// A validator of the schema at `pointer` in `doc`, its references resolved
/// in `doc`.
fn validator_at(doc: &Value, pointer: &str) -> jsonschema::Validator {
    const BASE: &str = "urn:hcp:openapi";
    let registry = jsonschema::Registry::new()
        .extend([(
            BASE.to_owned(),
            jsonschema::Resource::from_contents(doc.clone()),
        )])
        .expect("registry")
        .prepare()
        .expect("registry");
    let fragment: String = pointer
        .split('/')
        .map(|part| {
            part.replace('%', "%25")
                .replace('{', "%7B")
                .replace('}', "%7D")
                .replace(' ', "%20")
        })
        .collect::<Vec<_>>()
        .join("/");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_registry(&registry)
        .should_validate_formats(true)
        .build(&json!({"$ref": format!("{BASE}#{fragment}")}))
        .unwrap_or_else(|e| panic!("the schema at {pointer} does not compile: {e}"))
}

fn escape(part: &str) -> String {
    part.replace('~', "~0").replace('/', "~1")
}

/// Every place in `value` (a JSON pointer) where `visit` says so.
fn walk(value: &Value, pointer: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(pointer, value);
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                walk(v, &format!("{pointer}/{}", escape(k)), visit);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, &format!("{pointer}/{i}"), visit);
            }
        }
        _ => {}
    }
}

/// Problems of a Schema Object at `at`: not valid JSON Schema 2020-12.
fn check_schema(schema: &Value, at: &str, problems: &mut Vec<String>) {
    if let Err(e) = jsonschema::meta::validate(schema) {
        problems.push(format!("{at}: not a valid JSON Schema: {e}"));
    }
}

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Problems of an Operation Object.
fn check_operation(doc: &Value, path: &str, method: &str, op: &Value, problems: &mut Vec<String>) {
    let at = format!("/paths/{}/{method}", escape(path));
    let Some(op) = op.as_object() else {
        problems.push(format!("{at}: not an object"));
        return;
    };
    let responses = op.get("responses").and_then(Value::as_object);
    match responses {
        None => problems.push(format!("{at}: no responses")),
        Some(r) if r.is_empty() => problems.push(format!("{at}: no responses")),
        Some(r) => {
            for (code, response) in r {
                let valid_code = code == "default"
                    || (code.len() == 3
                        && code.starts_with(['1', '2', '3', '4', '5'])
                        && code[1..].chars().all(|c| c.is_ascii_digit() || c == 'X'));
                if !valid_code {
                    problems.push(format!("{at}/responses: {code:?} is not a status code"));
                }
                let response = resolve(doc, response);
                if response
                    .get("description")
                    .and_then(Value::as_str)
                    .is_none()
                {
                    problems.push(format!("{at}/responses/{code}: no description"));
                }
                check_content(
                    response.get("content"),
                    &format!("{at}/responses/{code}"),
                    problems,
                );
            }
        }
    }
    if let Some(body) = op.get("requestBody") {
        let body = resolve(doc, body);
        if body.get("content").and_then(Value::as_object).is_none() {
            problems.push(format!("{at}/requestBody: no content"));
        }
        check_content(body.get("content"), &format!("{at}/requestBody"), problems);
    }
    for (i, parameter) in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let parameter = resolve(doc, parameter);
        let name = parameter.get("name").and_then(Value::as_str);
        let place = parameter.get("in").and_then(Value::as_str);
        if name.is_none() || !matches!(place, Some("query" | "header" | "path" | "cookie")) {
            problems.push(format!(
                "{at}/parameters/{i}: needs name and in (query, header, path, cookie)"
            ));
        }
        if parameter.get("schema").is_none() && parameter.get("content").is_none() {
            problems.push(format!("{at}/parameters/{i}: needs schema or content"));
        }
        if place == Some("path") && parameter.get("required") != Some(&Value::Bool(true)) {
            problems.push(format!(
                "{at}/parameters/{i}: a path parameter must be required"
            ));
        }
    }
    // Every {name} of the template is a declared path parameter, and
    // every declared path parameter is in the template.
    let declared: BTreeSet<String> = op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| resolve(doc, p))
        .filter(|p| p.get("in").and_then(Value::as_str) == Some("path"))
        .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_owned))
        .chain(
            doc["paths"][path]
                .get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| resolve(doc, p))
                .filter(|p| p.get("in").and_then(Value::as_str) == Some("path"))
                .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_owned)),
        )
        .collect();
    let in_template: BTreeSet<String> = path
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(str::to_owned)
        .collect();
    if declared != in_template {
        problems.push(format!(
            "{at}: path parameters {declared:?}, the template has {in_template:?}"
        ));
    }
    for requirement in op
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for scheme in requirement.as_object().into_iter().flat_map(Map::keys) {
            if doc["components"]["securitySchemes"].get(scheme).is_none() {
                problems.push(format!("{at}: security scheme {scheme} is not defined"));
            }
        }
    }
}

fn check_content(content: Option<&Value>, at: &str, problems: &mut Vec<String>) {
    let Some(content) = content else { return };
    let Some(content) = content.as_object() else {
        problems.push(format!("{at}/content: not an object"));
        return;
    };
    for (media, object) in content {
        if !media.contains('/') {
            problems.push(format!("{at}/content: {media:?} is not a media type"));
        }
        if object.get("example").is_some() && object.get("examples").is_some() {
            problems.push(format!(
                "{at}/content/{media}: example and examples exclude each other"
            ));
        }
    }
}

/// A Reference Object followed within the document, or the object itself.
fn resolve<'d>(doc: &'d Value, value: &'d Value) -> &'d Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|p| doc.pointer(p))
            .unwrap_or(value),
        None => value,
    }
}

#[test]
fn openapi_document_is_valid_openapi_3_1() {
    let doc = document();
    let mut problems = Vec::new();

    // The OpenAPI Object.
    let version = doc["openapi"].as_str().unwrap_or_default();
    if !version.starts_with("3.1.") {
        problems.push(format!("openapi is {version:?}, not 3.1.x"));
    }
    for field in ["title", "version"] {
        if doc["info"][field].as_str().is_none() {
            problems.push(format!("info.{field} is missing"));
        }
    }
    let allowed_top = [
        "openapi",
        "info",
        "jsonSchemaDialect",
        "servers",
        "paths",
        "webhooks",
        "components",
        "security",
        "tags",
        "externalDocs",
    ];
    for key in doc.as_object().expect("an object").keys() {
        if !allowed_top.contains(&key.as_str()) && !key.starts_with("x-") {
            problems.push(format!("unknown top-level field {key}"));
        }
    }
    let paths = doc["paths"].as_object().expect("paths");
    let mut templates = BTreeMap::new();
    for (path, item) in paths {
        if !path.starts_with('/') {
            problems.push(format!("path {path} does not start with /"));
        }
        // Templates equal but for their parameters' names are one path.
        let shape: String = path
            .split('/')
            .map(|s| if s.starts_with('{') { "{}" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        if let Some(other) = templates.insert(shape, path.clone()) {
            problems.push(format!("paths {other} and {path} are the same template"));
        }
        for (key, op) in item.as_object().expect("a Path Item") {
            if METHODS.contains(&key.as_str()) {
                check_operation(&doc, path, key, op, &mut problems);
            } else if !["summary", "description", "servers", "parameters", "$ref"]
                .contains(&key.as_str())
                && !key.starts_with("x-")
            {
                problems.push(format!("{path}: unknown field {key}"));
            }
        }
    }

    // Every $ref resolves; every Schema Object is JSON Schema 2020-12.
    walk(&doc, "", &mut |at, value| {
        if let Some(r) = value.get("$ref").and_then(Value::as_str) {
            match r.strip_prefix('#') {
                Some(p) if doc.pointer(p).is_some() => {}
                _ => problems.push(format!("{at}: $ref {r} does not resolve in the document")),
            }
        }
        if at.ends_with("/schema") && value.is_object() {
            check_schema(value, at, &mut problems);
        }
    });
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .expect("components.schemas")
    {
        check_schema(
            schema,
            &format!("/components/schemas/{name}"),
            &mut problems,
        );
    }
    assert!(
        problems.is_empty(),
        "docs/openapi.json:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_example_in_openapi_validates_against_its_schema() {
    let doc = document();
    // (where the example is, the schema it must meet, the example)
    let mut examples: Vec<(String, String, Value)> = Vec::new();
    walk(&doc, "", &mut |at, value| {
        let Some(object) = value.as_object() else {
            return;
        };
        // A Media Type or Parameter Object: `example`, or `examples.*.value`,
        // against its `schema`.
        if object.contains_key("schema") && !at.contains("/components/schemas") {
            let schema = format!("{at}/schema");
            if let Some(example) = object.get("example") {
                examples.push((format!("{at}/example"), schema.clone(), example.clone()));
            }
            for (name, e) in object
                .get("examples")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let e = resolve(&doc, e);
                if let Some(v) = e.get("value") {
                    examples.push((format!("{at}/examples/{name}"), schema.clone(), v.clone()));
                }
            }
        }
        // A Schema Object's own `examples` (JSON Schema) against itself.
        if (at.starts_with("/components/schemas/") || at.ends_with("/schema"))
            && let Some(list) = object.get("examples").and_then(Value::as_array)
        {
            for (i, v) in list.iter().enumerate() {
                examples.push((format!("{at}/examples/{i}"), at.to_owned(), v.clone()));
            }
        }
    });
    // The generated messages carry the seeds' fixtures: at least one each.
    assert!(
        examples.len() >= MESSAGES.len(),
        "{} examples",
        examples.len()
    );
    let mut problems = Vec::new();
    for (at, schema, example) in &examples {
        let validator = validator_at(&doc, schema);
        for error in validator.iter_errors(example) {
            problems.push(format!(
                "{at} against {schema}: {} at {}",
                error,
                error.instance_path()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The check sees a bad example: a task_submit without its payload.
    let validator = validator_at(&doc, "/components/schemas/TaskSubmit");
    let mut bad = fixtures("task_submit").remove(0);
    bad["payload"] = json!({"capability": 7});
    assert!(!validator.is_valid(&bad), "a bad task_submit passed");
    let mut wrong_type = fixtures("task_accepted").remove(0);
    wrong_type["type"] = json!("task_submit");
    let message = validator_at(&doc, "/components/schemas/Message");
    assert!(
        !message.is_valid(&wrong_type),
        "a task_accepted payload passed as task_submit"
    );
}

/// The routes of the router (`host/serve/src/api.rs`, and `/mcp` of
/// `host/serve/src/mcp/http.rs`), as `METHOD /path`; `/mcp` takes any
/// method (`route_service`), written `* /mcp`.
fn router_routes() -> BTreeSet<String> {
    let mut routes = BTreeSet::new();
    for file in ["host/serve/src/api.rs", "host/serve/src/mcp/http.rs"] {
        let source = read(file);
        for (call, any_method) in [(".route_service(", true), (".route(", false)] {
            let mut rest = source.as_str();
            while let Some(start) = rest.find(call) {
                rest = &rest[start + call.len()..];
                let args = balanced(rest);
                let path = args
                    .trim_start()
                    .strip_prefix('"')
                    .and_then(|s| s.split_once('"'))
                    .map(|(p, _)| p)
                    .unwrap_or_else(|| panic!("{file}: a route without a literal path: {args}"));
                if any_method {
                    routes.insert(format!("* {path}"));
                    continue;
                }
                for method in ["get", "post", "put", "delete", "patch", "head"] {
                    let called = args.match_indices(&format!("{method}(")).any(|(i, _)| {
                        i == 0
                            || !args.as_bytes()[i - 1].is_ascii_alphanumeric()
                                && args.as_bytes()[i - 1] != b'_'
                                && args.as_bytes()[i - 1] != b':'
                    });
                    if called {
                        routes.insert(format!("{} {path}", method.to_uppercase()));
                    }
                }
            }
        }
    }
    routes
}

/// The text up to the parenthesis that closes the one just opened.
fn balanced(text: &str) -> &str {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses: {text}")
}

/// The operations of `docs/openapi.json`, as `METHOD /path`.
fn openapi_routes(doc: &Value) -> BTreeSet<String> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("a Path Item")
                .keys()
                .filter(|k| METHODS.contains(&k.as_str()))
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect()
}

/// The endpoints of the table in `docs/calling.md` (its rows under
/// `| endpoint | what |`), as `METHOD /path`: "`GET`/`POST /v1/x`" is
/// two, a query (`[?state=]`) is dropped.
fn table_routes() -> BTreeSet<String> {
    let text = read("docs/calling.md");
    let mut routes = BTreeSet::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| endpoint | what |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|---") {
            continue;
        }
        let Some(cell) = line.strip_prefix("| ").and_then(|l| l.split(" | ").next()) else {
            break;
        };
        for item in cell.split(", ") {
            let item = item.replace('`', "");
            let (methods, path) = item
                .split_once(' ')
                .unwrap_or_else(|| panic!("docs/calling.md: not `METHOD /path`: {item}"));
            let path = path.split('[').next().unwrap_or(path);
            for method in methods.split('/') {
                routes.insert(format!("{method} {path}"));
            }
        }
    }
    assert!(!routes.is_empty(), "no endpoint table in docs/calling.md");
    routes
}

#[test]
fn documented_endpoints_are_the_routers_routes() {
    let router = router_routes();
    assert!(router.contains("GET /v1/whoami"), "{router:#?}");
    assert!(router.contains("* /mcp"), "{router:#?}");
    let doc = document();
    // `/mcp` takes any method: the document and the table say which.
    let fixed = |set: BTreeSet<String>| -> BTreeSet<String> {
        set.into_iter()
            .map(|r| {
                if r.ends_with(" /mcp") {
                    "* /mcp".to_owned()
                } else {
                    r
                }
            })
            .collect()
    };
    let documented = fixed(openapi_routes(&doc));
    let missing: Vec<_> = router.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&router).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/openapi.json: routes it lacks {missing:?}; operations the router has not {extra:?}"
    );
    let table = fixed(table_routes());
    let missing: Vec<_> = router.difference(&table).collect();
    let extra: Vec<_> = table.difference(&router).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/calling.md's endpoint table: rows it lacks {missing:?}; rows the router has not {extra:?}"
    );
}
