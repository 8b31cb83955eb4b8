// The storm workbook: the handler's signal lines (Application Insights traces of the category
// Host.Function.Console, one JSON object per line) charted over a chosen time range, for the hours and days the
// live console (GET /api/console, the last 24 hours) does not keep. Each query names the events and fields of the
// catalog in shared/src/signals/catalog.rs; tests/tests/infra_rules/alerts.rs holds them to it.

@description('Azure region for the workbook.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Application Insights component the handler logs to.')
param appInsightsName string

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

// The JSON object of each of the handler's console lines, as `s`.
var signals = '''
traces
| where tostring(customDimensions.Category) == "Host.Function.Console"
| extend s = parse_json(message)
| where tostring(s.target) == "stormgate::gauges"
'''

var charts = [
  {
    title: 'Verdict (latest first)'
    visualization: 'table'
    query: concat(signals, '''
| where tostring(s.event) == "verdict"
| project timestamp, level = tostring(s.verdict_level), verdict = tostring(s.verdict_text)
| order by timestamp desc
| take 50
''')
  }
  {
    title: 'Oldest queued job per severity against its technician deadline (ms)'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "severity"
| summarize oldest_age_ms = max(tolong(s.oldest_age_ms)), deadline_ms = max(tolong(s.deadline_ms)) by bin(timestamp, 1m), severity = tostring(s.severity)
| project timestamp, series = strcat(severity, " oldest"), value = oldest_age_ms
| union (
    traces
    | where tostring(customDimensions.Category) == "Host.Function.Console"
    | extend s = parse_json(message)
    | where tostring(s.event) == "severity" and tostring(s.severity) in ("P1", "P2")
    | summarize value = max(tolong(s.deadline_ms)) by bin(timestamp, 1m), severity = tostring(s.severity)
    | project timestamp, series = strcat(severity, " deadline"), value)
''')
  }
  {
    title: 'Queued, held and in-flight jobs per severity'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "severity"
| summarize queued = max(tolong(s.queued)), held = max(tolong(s.held)), in_flight = max(tolong(s.in_flight)) by bin(timestamp, 1m), severity = tostring(s.severity)
| project timestamp, series = strcat(severity, " queued"), value = queued
''')
  }
  {
    title: 'Kafka consumer lag per partition (ms)'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "consumer_lag"
| summarize lag_max_ms = max(tolong(s.lag_max_ms)), lag_p50_ms = max(tolong(s.lag_p50_ms)) by bin(timestamp, 1m), partition = strcat(tostring(s.topic), "/", tostring(s.partition))
''')
  }
  {
    title: 'Records settled per minute'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "ingest"
| summarize events = sum(tolong(s.events)), accepted = sum(tolong(s.accepted)), skipped = sum(tolong(s.skipped)), dead_lettered = sum(tolong(s.dead_lettered)) by bin(timestamp, 1m)
''')
  }
  {
    title: 'Tokens per minute per deployment, and its quota (TPM less headroom)'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "deployment_status"
| summarize minute_tokens = max(tolong(s.minute_tokens)), minute_token_limit = max(tolong(s.minute_token_limit)) by bin(timestamp, 1m), deployment = tostring(s.deployment)
''')
  }
  {
    title: 'Requests per minute against RPM, and 429s per minute, per deployment'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "deployment_status"
| summarize requests_per_minute = max(tolong(s.requests_per_minute)), rpm = max(tolong(s.rpm)), throttles_per_minute = max(tolong(s.throttles_per_minute)) by bin(timestamp, 1m), deployment = tostring(s.deployment)
''')
  }
  {
    title: 'Deployment state and spend today (USD)'
    visualization: 'table'
    query: concat(signals, '''
| where tostring(s.event) == "deployment_status"
| summarize arg_max(timestamp, *) by deployment = tostring(s.deployment)
| project deployment, tier = tostring(s.tier), state = tostring(s.state), paused = tobool(s.paused), extractive_only = tobool(s.extractive_only), spend_today_usd = todouble(s.spend_today_usd), prompt_tokens_today = tolong(s.prompt_tokens_today), completion_tokens_today = tolong(s.completion_tokens_today)
''')
  }
  {
    title: 'Summaries stored per minute by tier'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "stored"
| summarize stored = sum(tolong(s.technician) + tolong(s.customer) + tolong(s.rollup)) by bin(timestamp, 1m), tier = tostring(s.tier)
''')
  }
  {
    title: 'Spills per minute'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "dispatch"
| summarize spilled_to_standard = sum(tolong(s.spilled_to_standard)), spilled_to_extractive = sum(tolong(s.spilled_to_extractive)), forced_extractive = sum(tolong(s.forced_extractive)) by bin(timestamp, 1m)
''')
  }
  {
    title: 'Customer notices and work notes waiting'
    visualization: 'timechart'
    query: '''
traces
| where tostring(customDimensions.Category) == "Host.Function.Console"
| extend s = parse_json(message)
| where tostring(s.event) == "sinks"
| summarize notices_waiting = max(tolong(s.notices_waiting)), work_notes_waiting = max(tolong(s.work_notes_waiting)) by bin(timestamp, 1m)
'''
  }
  {
    title: 'Redis memory (% of maxmemory)'
    visualization: 'timechart'
    query: concat(signals, '''
| where tostring(s.event) == "redis"
| summarize used_memory_percent = max(tolong(s.used_memory_percent)) by bin(timestamp, 5m)
''')
  }
  {
    title: 'Operator actions'
    visualization: 'table'
    query: concat(signals, '''
| where tostring(s.event) == "control"
| project timestamp, by = tostring(s.by), action = tostring(s.action), on = tostring(s.control_target), detail = tostring(s.detail), source = tostring(s.source)
| order by timestamp desc
''')
  }
]

var content = {
  version: 'Notebook/1.0'
  items: concat(
    [
      {
        type: 1
        name: 'title'
        content: {
          json: '## stormgate in a storm\nThe handler\'s signals (docs/operations.md, "Signals"). The live console is `GET /api/console`.'
        }
      }
      {
        type: 9
        name: 'parameters'
        content: {
          version: 'KqlParameterItem/1.0'
          parameters: [
            {
              id: 'time-range'
              version: 'KqlParameterItem/1.0'
              name: 'TimeRange'
              type: 4
              value: {
                durationMs: 21600000
              }
              typeSettings: {
                selectableValues: [
                  {
                    durationMs: 3600000
                  }
                  {
                    durationMs: 21600000
                  }
                  {
                    durationMs: 86400000
                  }
                  {
                    durationMs: 604800000
                  }
                ]
              }
            }
          ]
        }
      }
    ],
    map(charts, chart => {
      type: 3
      name: chart.title
      content: {
        version: 'KqlItem/1.0'
        query: chart.query
        size: 0
        title: chart.title
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: chart.visualization
      }
    })
  )
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name must be a GUID; this one is stable per component.
  name: guid(appInsights.id, 'stormgate-storm-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'stormgate: storm console'
    category: 'workbook'
    serializedData: string(content)
    sourceId: appInsights.id
    version: 'Notebook/1.0'
  }
}

output workbookId string = workbook.id
