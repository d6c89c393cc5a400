"""The KFP API client: submit and follow runs, pipelines and versions, recurring runs, credentials, preflight."""
