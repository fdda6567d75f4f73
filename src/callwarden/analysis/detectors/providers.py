"""Provider token regexes: one secret detector per service's documented token format.

Each has a literal prefix (``AKIA``, ``ghp_``, ``sk-ant-`` ...) as its prefilter keyword and
drops matches that look like placeholders or published examples.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence

from callwarden.analysis.detectors.core import _ASSIGNMENT_JSON_SCREEN, Detector, Validator
from callwarden.analysis.detectors.heuristics import _has_digit_and_letter, _is_placeholder


def _provider(name: str, family: str, keywords: Sequence[str], pattern: str, *,
              group: int | str = 0, validate: Validator | None = None, word: bool = True,
              ci_keywords: Sequence[str] = (), description: str = "",
              json_screen: str | None = None) -> Detector:
    def check(value: str) -> bool:
        return not _is_placeholder(value) and (validate is None or validate(value))

    return Detector(name, pattern, category="secret", family=family, keywords=keywords,
                    ci_keywords=ci_keywords, group=group, validate=check, word=word,
                    description=description or f"{family} credential", json_screen=json_screen)


_T = r"(?![A-Za-z0-9_\-])"  # end of a token


def _jwt_ok(value: str) -> bool:
    head = value.split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        header = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(header, dict) and bool({"alg", "typ", "enc", "kid"} & header.keys())


_PROVIDERS: list[Detector] = [
    # --- cloud
    _provider("aws_access_key_id", "aws", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
              r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}(?![A-Za-z0-9])",
              description="AWS access key id"),
    _provider("aws_secret_key", "aws", (),
              r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s{0,4}[:=]\s{0,4}"
              r"[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", group="s", word=False,
              ci_keywords=("secret",), json_screen=_ASSIGNMENT_JSON_SCREEN,
              description="AWS secret access key next to its name"),
    _provider("aws_bedrock_key", "aws", ("ABSK", "bedrock-api-key-"),
              r"ABSK[A-Za-z0-9+/]{100,300}={0,2}|bedrock-api-key-[A-Za-z0-9+/]{20,2000}={0,2}"),
    _provider("gcp_api_key", "gcp", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}" + _T),
    _provider("gcp_service_account", "gcp", ("private_key_id",),
              r"\"private_key_id\"\s{0,4}:\s{0,4}\"(?P<s>[0-9a-f]{40})\"", group="s", word=False),
    _provider("gcp_oauth_token", "gcp", ("GOCSPX-", "ya29.", "1//0"),
              r"GOCSPX-[A-Za-z0-9_\-]{28}" + _T + r"|ya29\.[0-9A-Za-z_\-]{30,}|1//0[0-9A-Za-z_\-]{40,}"),
    _provider("azure_storage_key", "azure", ("AccountKey=", "accountkey="),
              r"(?i:accountkey)=(?P<s>[A-Za-z0-9+/]{80,100}={0,2})", group="s"),
    _provider("azure_client_secret", "azure", ("Q~",),
              r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
    _provider("azure_sas_token", "azure", ("sig=",),
              r"[?&;]sig=(?P<s>[A-Za-z0-9%+/]{40,120}(?:%3D|=){0,2})", group="s", word=False),
    # --- code hosting and package registries
    _provider("github_token", "github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
              r"gh[pousr]_[A-Za-z0-9]{36,255}" + _T + r"|github_pat_[A-Za-z0-9_]{60,255}" + _T),
    _provider("gitlab_token", "gitlab",
              ("glpat-", "gldt-", "glft-", "glimt-", "glagent-", "glptt-", "glrt-", "glcbt-",
               "glsoat-", "gloas-", "glffct-", "GR1348941"),
              r"gl(?:pat|dt|ft|imt|agent|ptt|rt|cbt|soat|oas|ffct)-[0-9A-Za-z_\-]{20,300}" + _T
              + r"|GR1348941[0-9A-Za-z_\-]{20,}" + _T),
    _provider("npm_token", "npm", ("npm_",), r"npm_[A-Za-z0-9]{36}" + _T),
    _provider("pypi_token", "pypi", ("pypi-AgE",),
              r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{40,}"),
    _provider("rubygems_token", "rubygems", ("rubygems_",), r"rubygems_[a-f0-9]{48}" + _T),
    _provider("artifactory_token", "jfrog", ("AKCp", "cmVmd"),
              r"AKCp[A-Za-z0-9]{69}" + _T + r"|cmVmd[A-Za-z0-9]{59}" + _T),
    # --- chat and messaging
    _provider("slack_token", "slack", ("xox", "xapp-"),
              r"xox[a-z]{1,6}-[0-9A-Za-z\-]{8,300}" + _T + r"|xapp-\d-[A-Za-z0-9\-]{20,300}"),
    _provider("slack_webhook", "slack", ("hooks.slack.com/",),
              r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_\-]{20,200})",
              group="s", word=False),
    _provider("discord_webhook", "discord", ("/api/webhooks/",),
              r"discord(?:app)?\.com/api/webhooks/(?P<s>\d{5,30}/[A-Za-z0-9_\-]{50,})",
              group="s", word=False),
    _provider("teams_webhook", "microsoft", ("/IncomingWebhook/",),
              r"webhookb2/(?P<s>[A-Za-z0-9\-]{8,}@[A-Za-z0-9\-]{8,}/IncomingWebhook/"
              r"[A-Za-z0-9]{32}/[A-Za-z0-9\-]{36})", group="s", word=False),
    _provider("telegram_bot_token", "telegram", (":AA",), r"\d{8,10}:AA[0-9A-Za-z_\-]{33}" + _T),
    _provider("twilio_api_key", "twilio", ("SK",), r"SK[0-9a-fA-F]{32}" + _T,
              validate=_has_digit_and_letter),
    _provider("sendgrid_api_key", "sendgrid", ("SG.",), r"SG\.[A-Za-z0-9=_\-.]{60,80}" + _T,
              validate=lambda v: "." in v[3:]),
    _provider("mailgun_key", "mailgun", ("key-", "pubkey-"), r"(?:pub)?key-[a-f0-9]{32}" + _T),
    _provider("mailchimp_key", "mailchimp", ("-us",), r"[a-f0-9]{32}-us\d{1,2}" + _T),
    _provider("sendinblue_key", "sendinblue", ("xkeysib-",),
              r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _T),
    # --- payments
    _provider("stripe_key", "stripe", ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
              r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,247}" + _T + r"|whsec_[A-Za-z0-9+/=]{32,}"),
    _provider("square_token", "square", ("sq0atp-", "sq0csp-", "EAAA"),
              r"sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,60}" + _T + r"|EAAA[0-9A-Za-z_\-]{60}" + _T),
    _provider("shopify_token", "shopify", ("shpat_", "shpca_", "shppa_", "shpss_"),
              r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _T),
    _provider("flutterwave_key", "flutterwave", ("FLWSECK", "FLWPUBK"),
              r"FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{12,32}(?:-X)?" + _T),
    # --- AI providers
    _provider("openai_api_key", "openai", ("sk-",),
              r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,300}" + _T
              + r"|sk-[A-Za-z0-9_\-]{0,100}T3BlbkFJ[A-Za-z0-9_\-]{10,200}" + _T),
    _provider("anthropic_api_key", "anthropic", ("sk-ant-",),
              r"sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_\-]{32,300}" + _T),
    _provider("huggingface_token", "huggingface", ("hf_", "api_org_"),
              r"(?:hf|api_org)_[A-Za-z0-9]{30,40}" + _T),
    _provider("perplexity_api_key", "perplexity", ("pplx-",), r"pplx-[A-Za-z0-9]{40,60}" + _T),
    # --- SaaS and infrastructure
    _provider("age_secret_key", "age", ("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _provider("alibaba_access_key", "alibaba", ("LTAI",), r"LTAI[A-Za-z0-9]{20}" + _T),
    _provider("atlassian_token", "atlassian", ("ATATT3",), r"ATATT3[A-Za-z0-9_\-=]{150,250}"),
    _provider("cloudflare_origin_ca_key", "cloudflare", ("v1.0-",),
              r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _T),
    _provider("databricks_token", "databricks", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?" + _T),
    _provider("digitalocean_token", "digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"),
              r"do[opr]_v1_[a-f0-9]{64}" + _T),
    _provider("doppler_token", "doppler", ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa."),
              r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}" + _T),
    _provider("dynatrace_token", "dynatrace", ("dt0c01.",),
              r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}" + _T),
    _provider("easypost_token", "easypost", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}" + _T),
    _provider("frameio_token", "frameio", ("fio-u-",), r"fio-u-[A-Za-z0-9_=\-]{64}" + _T),
    _provider("grafana_token", "grafana", ("eyJrIjoi", "glc_", "glsa_"),
              r"eyJrIjoi[A-Za-z0-9+/_\-]{50,400}={0,3}|glc_[A-Za-z0-9+/]{32,400}={0,2}"
              r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _T),
    _provider("harness_token", "harness", ("pat.", "sat."),
              r"(?:pat|sat)\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}" + _T),
    _provider("terraform_token", "hashicorp", (".atlasv1.",),
              r"[a-z0-9]{14}\.atlasv1\.[a-z0-9\-_=]{60,70}" + _T),
    _provider("heroku_token", "heroku", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{60}" + _T),
    _provider("infracost_token", "infracost", ("ico-",), r"ico-[A-Za-z0-9]{32}" + _T),
    _provider("linear_api_key", "linear", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}" + _T),
    _provider("newrelic_key", "newrelic", ("NRAK-", "NRJS-", "NRII-"),
              r"NRAK-[A-Z0-9]{27}" + _T + r"|NRJS-[a-f0-9]{19}" + _T + r"|NRII-[A-Za-z0-9\-]{32}"),
    _provider("notion_token", "notion", ("ntn_",),
              r"ntn_\d{11}[A-Za-z0-9]{35}" + _T),
    _provider("openshift_token", "openshift", ("sha256~",), r"sha256~[A-Za-z0-9_\-]{43}" + _T),
    _provider("planetscale_token", "planetscale", ("pscale_",),
              r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.\-]{32,64}" + _T),
    _provider("postman_token", "postman", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _T),
    _provider("prefect_token", "prefect", ("pnu_",), r"pnu_[A-Za-z0-9]{36}" + _T),
    _provider("pulumi_token", "pulumi", ("pul-",), r"pul-[a-f0-9]{40}" + _T),
    _provider("readme_token", "readme", ("rdme_",), r"rdme_[a-z0-9]{70}" + _T),
    _provider("scalingo_token", "scalingo", ("tk-us-",), r"tk-us-[A-Za-z0-9_\-]{48}" + _T),
    _provider("sentry_token", "sentry", ("sntrys_", "sntryu_"),
              r"sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{60,400}|sntryu_[a-f0-9]{64}" + _T),
    _provider("settlemint_token", "settlemint", ("sm_aat_", "sm_pat_", "sm_sat_"),
              r"sm_[aps]at_[A-Za-z0-9]{16}" + _T),
    _provider("shippo_token", "shippo", ("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}" + _T),
    _provider("typeform_token", "typeform", ("tfp_",), r"tfp_[A-Za-z0-9_.=\-]{55,65}" + _T),
    _provider("duffel_token", "duffel", ("duffel_",), r"duffel_(?:test|live)_[A-Za-z0-9_=\-]{43}" + _T),
    _provider("yandex_key", "yandex", ("AQVN", "YC"),
              r"AQVN[A-Za-z0-9_\-]{35,38}" + _T + r"|YC[A-Za-z0-9_\-]{38}" + _T),
    _provider("twitter_bearer_token", "twitter", ("AAAAAAAAAAAAAAAAAAAA",),
              r"A{22}[A-Za-z0-9%]{30,200}", validate=lambda v: len(set(v)) > 10),
    _provider("dropbox_token", "dropbox", ("sl.",), r"sl\.[A-Za-z0-9_\-]{130,160}" + _T),
    _provider("jwt", "jwt", ("eyJ",),
              r"eyJ[A-Za-z0-9_\-]{10,2000}={0,2}\.[A-Za-z0-9_\-]{4,10000}={0,2}\."
              r"[A-Za-z0-9_\-+/]{0,2000}={0,2}", validate=_jwt_ok,
              description="JSON Web Token with a valid base64url JSON header"),
]
