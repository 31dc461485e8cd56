#!/usr/bin/env python3
"""Run `cairn template validate` and `cairn template expand` over a corpus of compiled ARM JSON templates.

For each template (every `main.json` under --corpus), a parameters file is synthesized from the template's declared
types: the required parameters (no `defaultValue`, not `nullable`), following `$ref` into `definitions`, with
plausible values (resource IDs for names ending in `Id`/`ResourceId`, `westeurope` for locations, the first of
`allowedValues`, the literal the template compares a string with, lengths and bounds respected, the required
properties of object types and the first variant of a discriminated union). Parameters required in effect are
given too: nullable ones described as `Conditional.` (AVM's "required if ..."), and nullable ones the template
reads without a guard (`parameters('p').x`, `parameters('p')[0]`, here or in a nested deployment it is passed to);
those reads also shape objects and arrays whose type does not say what they hold (resource-derived types). The
deployment context follows the scope the template's `$schema` names. The summary gives the pass rates and the
errors grouped into categories (quoted names, numbers and GUIDs normalized), each with a count of templates, of
validate and expand runs, and one example.

    python3 scripts/corpus.py --cairn target/release/cairn --corpus /work/corpus/avm --jobs 2 --json results.json

Python 3 standard library only. The corpus is read, never written; scratch files go to a temporary directory.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
TENANT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
GUID = "01234567-89ab-cdef-0123-456789abcdef"
RESOURCE_GROUP = "rg-corpus"
LOCATION = "westeurope"
MANAGEMENT_GROUP = "mg-corpus"

SCOPES = {
    "deploymentTemplate.json": "resourceGroup",
    "subscriptionDeploymentTemplate.json": "subscription",
    "managementGroupDeploymentTemplate.json": "managementGroup",
    "tenantDeploymentTemplate.json": "tenant",
}


def scope_of(template):
    schema = str(template.get("$schema", ""))
    name = schema.rsplit("/", 1)[-1].split("#", 1)[0]
    return SCOPES.get(name, "resourceGroup")


def context_for(scope):
    ctx = {
        "tenantId": TENANT,
        "subscriptionId": SUBSCRIPTION,
        "resourceGroup": RESOURCE_GROUP,
        "resourceGroupLocation": LOCATION,
        "deploymentName": "corpus",
        "utcNow": "2026-12-07T12:00:00Z",
    }
    if scope == "resourceGroup":
        # A group as the portal or azd creates it: `resourceGroup().tags` is there (an untagged group made with
        # `az group create` has none, and ARM then rejects templates that read it).
        ctx["resourceGroupObject"] = {
            "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}",
            "name": RESOURCE_GROUP,
            "type": "Microsoft.Resources/resourceGroups",
            "location": LOCATION,
            "tags": {},
            "properties": {"provisioningState": "Succeeded"},
        }
    else:
        ctx["location"] = LOCATION
    if scope == "managementGroup":
        ctx["managementGroup"] = MANAGEMENT_GROUP
    return ctx


# --- parameter synthesis --------------------------------------------------------------------------------------

def rid(provider_type, name="corpus", child=None):
    """A resource ID in the corpus' resource group: `Namespace/type` named `name`, with a `(type, name)` child."""
    namespace, kind = provider_type.split("/", 1)
    path = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/{namespace}/{kind}/{name}"
    if child:
        path += f"/{child[0]}/{child[1]}"
    return path


# Resource IDs by a word of the parameter's name (lower case), most specific first.
RESOURCE_IDS = [
    ("subnet", rid("Microsoft.Network/virtualNetworks", "vnet-corpus", ("subnets", "snet-corpus"))),
    ("virtualnetwork", rid("Microsoft.Network/virtualNetworks", "vnet-corpus")),
    ("vnet", rid("Microsoft.Network/virtualNetworks", "vnet-corpus")),
    ("virtualhub", rid("Microsoft.Network/virtualHubs", "vhub-corpus")),
    ("storageaccount", rid("Microsoft.Storage/storageAccounts", "stcorpus")),
    ("storage", rid("Microsoft.Storage/storageAccounts", "stcorpus")),
    ("workspace", rid("Microsoft.OperationalInsights/workspaces", "log-corpus")),
    ("loganalytics", rid("Microsoft.OperationalInsights/workspaces", "log-corpus")),
    ("keyvault", rid("Microsoft.KeyVault/vaults", "kv-corpus")),
    ("vault", rid("Microsoft.KeyVault/vaults", "kv-corpus")),
    ("eventhub", rid("Microsoft.EventHub/namespaces", "evhns-corpus", ("eventhubs", "evh-corpus"))),
    ("customlocation", rid("Microsoft.ExtendedLocation/customLocations", "cl-corpus")),
    ("environment", rid("Microsoft.App/managedEnvironments", "cae-corpus")),
    ("identity", rid("Microsoft.ManagedIdentity/userAssignedIdentities", "id-corpus")),
    ("publicip", rid("Microsoft.Network/publicIPAddresses", "pip-corpus")),
    ("firewallpolicy", rid("Microsoft.Network/firewallPolicies", "afwp-corpus")),
    ("wafpolicy", rid("Microsoft.Network/ApplicationGatewayWebApplicationFirewallPolicies", "waf-corpus")),
    ("hybridconnection", rid("Microsoft.Relay/namespaces", "relay-corpus", ("hybridConnections", "hc-corpus"))),
    ("logger", rid("Microsoft.Insights/components", "appi-corpus")),
    ("serverfarm", rid("Microsoft.Web/serverfarms", "asp-corpus")),
    ("appserviceplan", rid("Microsoft.Web/serverfarms", "asp-corpus")),
    ("disk", rid("Microsoft.Compute/disks", "disk-corpus")),
    ("image", rid("Microsoft.Compute/galleries", "gal-corpus", ("images", "img-corpus"))),
    ("cluster", rid("Microsoft.ContainerService/managedClusters", "aks-corpus")),
    ("registry", rid("Microsoft.ContainerRegistry/registries", "crcorpus")),
    ("dnszone", rid("Microsoft.Network/privateDnsZones", "privatelink.blob.core.windows.net")),
    ("networksecuritygroup", rid("Microsoft.Network/networkSecurityGroups", "nsg-corpus")),
    ("routetable", rid("Microsoft.Network/routeTables", "rt-corpus")),
    ("hostpool", rid("Microsoft.DesktopVirtualization/hostPools", "vdpool-corpus")),
    ("account", rid("Microsoft.Storage/storageAccounts", "stcorpus")),
]

GUID_SUFFIXES = ("principalid", "tenantid", "subscriptionid", "clientid", "objectid", "applicationid", "appid")


def resource_id_for(name):
    lower = name.lower()
    if lower.endswith("policydefinitionid"):
        return f"/providers/Microsoft.Authorization/policyDefinitions/{GUID}"
    if lower.endswith("policysetdefinitionid"):
        return f"/providers/Microsoft.Authorization/policySetDefinitions/{GUID}"
    if lower.endswith("policyassignmentid"):
        return f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/policyAssignments/corpus"
    if "roledefinition" in lower:
        return "/providers/Microsoft.Authorization/roleDefinitions/acdd72a7-3385-48ef-bd42-f606fba81ae7"
    if lower.endswith("resourcegroupid") or lower.endswith("resourcegroupresourceid"):
        return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}"
    for word, value in RESOURCE_IDS:
        if word in lower:
            return value
    return rid("Microsoft.Resources/deploymentScripts", "corpus")


def string_for(name, spec, literal=None, path=None):
    lower = name.lower()
    if literal is not None:
        value = literal
    elif lower.endswith("location") or lower == "region":
        value = LOCATION
    elif lower.endswith("subscriptionid"):
        value = SUBSCRIPTION
    elif lower.endswith("tenantid"):
        value = TENANT
    elif lower.endswith(GUID_SUFFIXES):
        value = GUID
    elif lower == "roledefinitionidorname":
        value = "Reader"
    elif lower.endswith("managementgroupid") or lower.endswith("managementgroupname"):
        value = MANAGEMENT_GROUP
    elif lower.endswith("resourcegroupname"):
        value = RESOURCE_GROUP
    elif lower.endswith("subscriptionname"):
        value = "sub-corpus"
    elif lower.endswith("resourceid") or (lower.endswith("id") and not lower.endswith("groupid")):
        value = resource_id_for(name)
    elif "email" in lower:
        value = "ops@example.com"
    elif lower.endswith(("uri", "url", "endpoint")):
        value = "https://example.com/corpus"
    elif "addressprefix" in lower or "cidr" in lower:
        value = "10.0.0.0/24"
    elif "ipaddress" in lower:
        value = "10.0.0.4"
    elif lower == "groupid":
        value = "blob"
    elif lower.endswith("version"):
        value = "1.0"
    elif lower in ("hostname", "domainname") or lower.endswith("hostname") or lower.endswith("fqdn"):
        value = "corpus.example.com"
    elif lower.endswith(("ingb", "inmb", "count")):
        value = "1"
    elif lower.endswith("vmsize"):
        value = "Standard_D2s_v3"
    elif lower == "name":
        value = "corpus01"
    elif lower.endswith("name"):
        # Distinct parameters get distinct names (two resources of a template named alike collide).
        stem = re.sub(r"[^a-z0-9]", "", lower[:-4])
        salt = (path or name).lower().encode()
        value = f"corpus{stem[:8]}{zlib.crc32(salt) & 0xffff:04x}"
    else:
        value = "corpus-" + re.sub(r"[^a-z0-9]", "", lower)[:16]
    lo, hi = spec.get("minLength"), spec.get("maxLength")
    if isinstance(hi, int) and len(value) > hi:
        value = value[:hi]
    if isinstance(lo, int) and len(value) < lo:
        value = value + "x" * (lo - len(value))
    return value


INT_LEAF = re.compile(r"(mb|gb|count|processors|size|port|priority|weight|capacity|number)$", re.I)
BOOL_LEAF = re.compile(r"^(enabled?|is[A-Z].*|enable[A-Z].*|.*Enabled)$")


def leaf_for(name, path=None):
    if BOOL_LEAF.match(name):
        return True
    if INT_LEAF.search(name):
        return 1
    return string_for(name, {}, path=path)


READ = re.compile(r"parameters\('([^']+)'\)((?:\.[A-Za-z_$][\w$]*|\[[^\[\]]*\])+)")
STEP = re.compile(r"\.([A-Za-z_$][\w$]*)|\[([^\[\]]*)\]")
EQUALS = [re.compile(r"equals\(parameters\('([^']+)'\), '([^']+)'\)"),
          re.compile(r"equals\('([^']+)', parameters\('([^']+)'\)\)")]


def steps_of(path):
    return [("prop", prop) if prop else ("index", index) for prop, index in STEP.findall(path)]


WHOLE_READ = re.compile(r"\[parameters\('([^']+)'\)((?:\.[A-Za-z_$][\w$]*|\[[^\[\]]*\])*)\]")


def own_strings(node, out, nested):
    """The strings of a template, without the templates of nested deployments that evaluate in their own scope
    (their `properties` go to `nested`)."""
    if isinstance(node, str):
        out.append(node)
    elif isinstance(node, list):
        for item in node:
            own_strings(item, out, nested)
    elif isinstance(node, dict):
        props = node.get("properties")
        inner = isinstance(props, dict) and isinstance(props.get("template"), dict) and str(
            (props.get("expressionEvaluationOptions") or {}).get("scope", "")).lower() == "inner"
        for key, value in node.items():
            if inner and key == "properties":
                nested.append(value)
                own_strings({k: v for k, v in value.items() if k != "template"}, out, nested)
            else:
                own_strings(value, out, nested)
    return out


class Synth:
    """Values for a template's parameters from their declared types and from how the template reads them."""

    def __init__(self, template, depth=0):
        self.definitions = template.get("definitions") or {}
        self.reads = collections.defaultdict(list)  # parameter -> [[step, ...], ...]
        self.literals = {}  # parameter -> the first literal the template compares it with
        nested = []
        for text in own_strings({k: v for k, v in template.items() if k != "parameters"}, [], nested):
            if "parameters(" not in text:
                continue
            for name, path in READ.findall(text):
                self.reads[name.lower()].append(steps_of(path))
            for name, lit in EQUALS[0].findall(text):
                self.literals.setdefault(name.lower(), lit)
            for lit, name in EQUALS[1].findall(text):
                self.literals.setdefault(name.lower(), lit)
        # What a nested deployment reads of a parameter it is given as `parameters('p').path` is read of `p`
        # (and an array the child wants `minLength` items of gets them).
        for props in nested if depth < 8 else []:
            child_template = props["template"]
            child = Synth(child_template, depth + 1)
            declared = child_template.get("parameters") or {}
            for cname, entry in (props.get("parameters") or {}).items():
                m = WHOLE_READ.fullmatch(entry.get("value", "")) if isinstance(entry, dict) and isinstance(
                    entry.get("value"), str) else None
                if not m:
                    continue
                base = steps_of(m.group(2))
                for steps in child.reads.get(cname.lower(), []):
                    self.reads[m.group(1).lower()].append(base + steps)
                cspec = child.resolve(declared.get(cname, {}))
                lo = cspec.get("minLength")
                if str(cspec.get("type", "")).lower() == "array" and isinstance(lo, int) and lo > 0:
                    self.reads[m.group(1).lower()].append(base + [("index", str(lo - 1))])

    def resolve(self, spec, depth=0):
        """The type spec with every top-level `$ref` followed (keys beside `$ref` win, as in Bicep's output)."""
        while isinstance(spec, dict) and "$ref" in spec and depth < 32:
            ref = spec["$ref"]
            target = {}
            if isinstance(ref, str) and ref.startswith("#/definitions/"):
                target = self.definitions.get(ref[len("#/definitions/"):], {})
            merged = dict(target)
            merged.update({k: v for k, v in spec.items() if k != "$ref"})
            if "$ref" in target and spec is not target:
                merged["$ref"] = target["$ref"]
            spec = merged
            depth += 1
        return spec if isinstance(spec, dict) else {}

    def variant(self, spec, value=None):
        """The object type of a discriminated union: the variant `value` names, else the first."""
        disc = spec.get("discriminator")
        if not isinstance(disc, dict) or not disc.get("mapping"):
            return spec, None
        prop = disc.get("propertyName", "type")
        mapping = disc["mapping"]
        named = value.get(prop) if isinstance(value, dict) else None
        key = named if isinstance(named, str) and named in mapping else next(iter(mapping))
        return self.resolve(mapping[key]), (prop, key)

    def value(self, name, spec, depth=0, literal=None, path=None):
        path = path or name
        spec = self.resolve(spec)
        allowed = spec.get("allowedValues")
        kind = str(spec.get("type", "")).lower()
        if allowed and kind != "array":
            return allowed[0]
        if depth > 12:
            return None
        variant, tag = self.variant(spec)
        if tag:
            obj = self.value(name, variant, depth + 1, path=path)
            if not isinstance(obj, dict):
                obj = {}
            obj[tag[0]] = tag[1]
            return obj
        if kind == "string":
            return string_for(name, spec, literal, path)
        if kind == "securestring":
            secret = "Corpus-Secret-0!"
            return secret[: spec["maxLength"]] if isinstance(spec.get("maxLength"), int) else secret
        if kind == "int":
            lo, hi = spec.get("minValue"), spec.get("maxValue")
            v = 1
            if isinstance(lo, int):
                v = max(v, lo)
            if isinstance(hi, int):
                v = min(v, hi)
            return v
        if kind == "bool":
            return False
        if kind in ("object", "secureobject"):
            out = {}
            for pname, pspec in (spec.get("properties") or {}).items():
                if self.required(pspec):
                    out[pname] = self.value(pname, pspec, depth + 1, path=f"{path}.{pname}")
            return out
        if kind == "array":
            lo = spec.get("minLength")
            if isinstance(lo, int) and lo > 0:
                items = spec.get("items")
                if allowed:
                    return allowed[:lo]
                if isinstance(items, dict):
                    return [self.value(name.rstrip("s"), items, depth + 1, path=f"{path}[{i}]") for i in range(lo)]
                return [string_for(name.rstrip("s"), {}, path=f"{path}[{i}]") for i in range(lo)]
            return []
        # A type given only by a union of literals (`allowedValues` above) or unknown: a string.
        return string_for(name, spec, literal, path)

    def shape(self, name, value, steps, spec, path):
        """`value` extended so that the template's unguarded read `steps` finds something; the declared type
        `spec` (when there is one) gives what is added."""
        if not steps:
            return value
        (kind, key), rest = steps[0], steps[1:]
        spec = self.resolve(spec)
        if kind == "index" and key.startswith("'") and key.endswith("'"):
            kind, key = "prop", key[1:-1]
        if kind == "prop":
            if value is None:
                value = {}
            if not isinstance(value, dict):
                return value
            spec, _ = self.variant(spec, value)
            sub = (spec.get("properties") or {}).get(key)
            sub_path = f"{path}.{key}"
            if key not in value or value[key] is None:
                if sub:
                    value[key] = self.value(key, sub, path=sub_path)
                else:
                    value[key] = None if rest else leaf_for(key, sub_path)
            value[key] = self.shape(key, value[key], rest, sub or {}, sub_path)
            return value
        # An index: a literal number, or an expression (copyIndex()) read as the first item.
        if value is None:
            value = []
        if not isinstance(value, list):
            return value
        wanted = int(key) + 1 if key.isdigit() else 1
        items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        singular = name[:-1] if name.endswith("s") else name
        while len(value) < wanted:
            at = f"{path}[{len(value)}]"
            value.append(self.value(singular, items, path=at) if items else (None if rest else leaf_for(singular, at)))
        value[wanted - 1] = self.shape(singular, value[wanted - 1], rest, items, f"{path}[{wanted - 1}]")
        return value

    def required(self, spec):
        resolved = self.resolve(spec)
        return "defaultValue" not in resolved and not resolved.get("nullable") and not spec.get("nullable")

    def wanted(self, name, spec):
        """Declared required, or in effect: nullable with no default, and described as `Conditional.` or read
        without a guard (`parameters('p').x`, here or in a nested deployment it is given to)."""
        if self.required(spec):
            return True
        if "defaultValue" in spec or "defaultValue" in self.resolve(spec):
            return False
        description = str((spec.get("metadata") or {}).get("description", ""))
        return description.startswith("Conditional.") or bool(self.reads.get(name.lower()))

    def parameters(self, template):
        out = {}
        for name, spec in (template.get("parameters") or {}).items():
            if not isinstance(spec, dict) or not self.wanted(name, spec):
                continue
            value = self.value(name, spec, literal=self.literals.get(name.lower()))
            # The deepest reads first: `p.a[0].b` makes `a` an array before `length(p.a)` would make it a leaf.
            for steps in sorted(self.reads.get(name.lower(), []), key=len, reverse=True):
                value = self.shape(name, value, steps, spec, name)
            out[name] = {"value": value}
        return out


def synthesize(template):
    return Synth(template).parameters(template)


# --- running cairn --------------------------------------------------------------------------------------------

ERROR_LINE = re.compile(r"^error\[([^\]]+)\]: (.*)$")
AT_LINE = re.compile(r"^\s*--> .*?\((.*)\)\s*$")


def parse_errors(stderr):
    errors = []
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        m = ERROR_LINE.match(line)
        if not m:
            continue
        path = ""
        if i + 1 < len(lines):
            at = AT_LINE.match(lines[i + 1])
            if at:
                path = at.group(1)
        errors.append({"code": m.group(1), "message": m.group(2), "path": path})
    if not errors and stderr.strip():
        text = stderr.strip()
        try:
            err = json.loads(text).get("error", {})
            errors.append({"code": err.get("code", "?"), "message": err.get("message", text), "path": ""})
        except (ValueError, AttributeError):
            errors.append({"code": "?", "message": text.splitlines()[0][:500], "path": ""})
    return errors


def run_cairn(cairn, verb, template, params, context, timeout):
    cmd = [cairn, "template", verb, "-f", template, "-p", "@" + params, "--context", context, "-o", "json"]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "seconds": timeout,
                "errors": [{"code": "Timeout", "message": f"no answer within {timeout} s", "path": ""}]}
    seconds = round(time.monotonic() - start, 2)
    if proc.returncode == 0:
        return {"ok": True, "seconds": seconds, "errors": []}
    errors = parse_errors(proc.stderr)
    if not errors:
        errors = [{"code": "Exit", "message": f"exit code {proc.returncode} without a message", "path": ""}]
    return {"ok": False, "seconds": seconds, "exit": proc.returncode, "errors": errors}


def process(args, workdir, path):
    rel = os.path.relpath(path, args.corpus)
    try:
        with open(path, encoding="utf-8-sig") as f:
            template = json.load(f)
    except (OSError, ValueError) as e:
        return {"template": rel, "skipped": f"not JSON: {e}"}
    scope = scope_of(template)
    params = synthesize(template)
    stem = re.sub(r"[^A-Za-z0-9]+", "_", rel)
    pfile = os.path.join(workdir, stem + ".parameters.json")
    with open(pfile, "w") as f:
        json.dump({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
            "contentVersion": "1.0.0.0",
            "parameters": params,
        }, f, indent=2)
    context = os.path.join(workdir, f"context.{scope}.json")
    result = {"template": rel, "scope": scope, "parameters": params}
    for verb in ("validate", "expand"):
        result[verb] = run_cairn(args.cairn, verb, path, pfile, context, args.timeout)
    return result


# --- categories -----------------------------------------------------------------------------------------------

def normalize(message):
    m = message
    m = re.sub(r" \(in '.*'\)$", "", m)  # the expression text the message quotes at its end
    m = re.sub(r"'\[.*?\]'(?=[\s:.,;)]|$)", "'…'", m)  # quoted expressions, which quote inside
    m = re.sub(r"(?<![A-Za-z])'[^']*'(?![A-Za-z])", "'…'", m)
    m = re.sub(r"\"[^\"]*\"", "\"…\"", m)
    m = re.sub(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<guid>", m)
    m = re.sub(r"/subscriptions/\S+", "<id>", m)
    m = re.sub(r"\b\d+(\.\d+)?\b", "N", m)
    return m[:300]


def summarize(results, out=sys.stdout):
    done = [r for r in results if "skipped" not in r]
    n = len(done)
    v = sum(r["validate"]["ok"] for r in done)
    e = sum(r["expand"]["ok"] for r in done)
    by_scope = collections.Counter(r["scope"] for r in done)
    pct = lambda k: f"{100.0 * k / n:.1f}%" if n else "-"
    print(f"templates: {n} ({', '.join(f'{s} {c}' for s, c in sorted(by_scope.items()))})", file=out)
    skipped = [r for r in results if "skipped" in r]
    if skipped:
        print(f"skipped (not JSON): {len(skipped)}", file=out)
    print(f"validate passes: {v}/{n} ({pct(v)})", file=out)
    print(f"expand passes:   {e}/{n} ({pct(e)})", file=out)
    cats = collections.OrderedDict()
    for r in done:
        seen = set()
        for verb in ("validate", "expand"):
            for err in r[verb]["errors"]:
                key = (err["code"], normalize(err["message"]))
                cat = cats.setdefault(key, {"templates": set(), "validate": 0, "expand": 0,
                                            "example": None})
                if (key, verb) not in seen:
                    cat[verb] += 1
                    seen.add((key, verb))
                cat["templates"].add(r["template"])
                if cat["example"] is None:
                    cat["example"] = {"template": r["template"], "path": err["path"], "message": err["message"]}
    ordered = sorted(cats.items(), key=lambda kv: (-len(kv[1]["templates"]), kv[0]))
    if ordered:
        print("\nerror categories (templates with the error; validate/expand counts; an example):", file=out)
    for (code, message), cat in ordered:
        ex = cat["example"]
        print(f"\n{len(cat['templates']):4d}  [{code}] {message}", file=out)
        print(f"      validate {cat['validate']}, expand {cat['expand']}", file=out)
        print(f"      e.g. {ex['template']}" + (f" at {ex['path']}" if ex["path"] else ""), file=out)
        print(f"      {ex['message'][:400]}", file=out)
    return [{"code": c, "category": m, "templates": sorted(cat["templates"]), "validate": cat["validate"],
             "expand": cat["expand"], "example": cat["example"]} for (c, m), cat in ordered]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cairn", default="target/release/cairn", help="the cairn binary")
    ap.add_argument("--corpus", required=True, help="directory searched for main.json templates")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="templates run at once")
    ap.add_argument("--json", dest="json_out", help="write the full results here")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per cairn run")
    ap.add_argument("--pattern", default="main.json", help="file name of the templates (default main.json)")
    ap.add_argument("--only", help="only templates whose path contains this text")
    args = ap.parse_args()
    args.cairn = os.path.abspath(args.cairn)
    args.corpus = os.path.abspath(args.corpus)

    paths = []
    for root, dirs, files in os.walk(args.corpus):
        dirs.sort()
        for name in sorted(files):
            if name == args.pattern:
                path = os.path.join(root, name)
                if not args.only or args.only in path:
                    paths.append(path)
    if not paths:
        sys.exit(f"no {args.pattern} under {args.corpus}")

    with tempfile.TemporaryDirectory(prefix="cairn-corpus-") as workdir:
        for scope in SCOPES.values():
            with open(os.path.join(workdir, f"context.{scope}.json"), "w") as f:
                json.dump(context_for(scope), f)
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(process, args, workdir, p) for p in paths]
            for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                results.append(fut.result())
                if sys.stderr.isatty():
                    print(f"\r{i}/{len(paths)}", end="", file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            print(file=sys.stderr)
    results.sort(key=lambda r: r["template"])
    categories = summarize(results)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"cairn": args.cairn, "corpus": args.corpus, "results": results,
                       "categories": categories}, f, indent=1)


if __name__ == "__main__":
    main()
