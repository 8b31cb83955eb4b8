// Alert rules over the signal lines the handler logs (Application Insights traces: the Functions host logs a
// custom handler's stdout under the category Host.Function.Console, one JSON object per line) and one host
// line (a queue message moved to its poison queue). Each query names the event and the fields of the catalog
// in shared/src/signals/catalog.rs; tests/tests/infra_rules/alerts.rs holds them to it. What to do when each
// fires: docs/operations.md, "Alerts".

@description('Azure region for the alert rules.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Application Insights component the handler logs to.')
param appInsightsName string

@description('Resource id of the action group the alerts notify; empty: the alerts fire in the portal only.')
param actionGroupId string

@description('Consumer lag, in seconds, above which ingest is behind.')
@minValue(10)
param consumerLagSeconds int

@description('429s per minute on one deployment above which its budget is set too high.')
@minValue(1)
param throttlesPerMinute int

@description('Dead letters per hour above which a producer has probably changed its messages.')
@minValue(1)
param deadLettersPerHour int

@description('Redis memory use, in percent of maxmemory, above which it must be scaled or retention lowered.')
@minValue(10)
@maxValue(99)
param redisMemoryPercent int

@description('Failed invocations per function in 15 minutes above which someone must look.')
@minValue(1)
param functionFailures int

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

var actions = empty(actionGroupId)
  ? {}
  : {
      actionGroups: [
        actionGroupId
      ]
    }

// Every rule reads the handler's lines the same way: the JSON object of a console line as `s`.
var signals = '''
traces
| where tostring(customDimensions.Category) == "Host.Function.Console"
| extend s = parse_json(message)
| where tostring(s.target) == "stormgate::gauges"
'''

var rules = [
  {
    name: 'p1-p2-behind-deadline'
    displayName: 'stormgate: P1/P2 summaries behind their deadline'
    description: 'The oldest queued P1 or P2 job waited past its deadline (severity lines, behind_ms > 0).'
    severity: 1
    windowSize: 'PT5M'
    evaluationFrequency: 'PT5M'
    query: concat(signals, '''
| where tostring(s.event) == "severity" and tostring(s.severity) in ("P1", "P2")
| summarize behind_ms = max(tolong(s.behind_ms)) by severity = tostring(s.severity)
''')
    measure: 'behind_ms'
    aggregation: 'Maximum'
    threshold: 0
    dimensions: [
      'severity'
    ]
  }
  {
    name: 'consumer-lag'
    displayName: 'stormgate: Kafka consumer lag'
    description: 'Records reach classify later than the threshold after Kafka stamped them (consumer_lag lines).'
    severity: 2
    windowSize: 'PT5M'
    evaluationFrequency: 'PT5M'
    query: concat(signals, '''
| where tostring(s.event) == "consumer_lag"
| summarize lag_max_ms = max(tolong(s.lag_max_ms)) by partition = tostring(s.partition)
''')
    measure: 'lag_max_ms'
    aggregation: 'Maximum'
    threshold: consumerLagSeconds * 1000
    dimensions: [
      'partition'
    ]
  }
  {
    name: 'throttled'
    displayName: 'stormgate: Azure OpenAI 429s'
    description: 'A deployment answers 429 more often than the threshold (deployment_status lines, throttles_per_minute).'
    severity: 2
    windowSize: 'PT5M'
    evaluationFrequency: 'PT5M'
    query: concat(signals, '''
| where tostring(s.event) == "deployment_status"
| summarize throttles_per_minute = max(tolong(s.throttles_per_minute)) by deployment = tostring(s.deployment)
''')
    measure: 'throttles_per_minute'
    aggregation: 'Maximum'
    threshold: throttlesPerMinute
    dimensions: [
      'deployment'
    ]
  }
  {
    name: 'deployment-down'
    displayName: 'stormgate: a deployment is down'
    description: 'A deployment is down (a daily quota) or marked down by an operator; its work spills (deployment_status lines, down).'
    severity: 1
    windowSize: 'PT5M'
    evaluationFrequency: 'PT5M'
    query: concat(signals, '''
| where tostring(s.event) == "deployment_status" and tobool(s.down)
| summarize down_lines = count() by deployment = tostring(s.deployment), state = tostring(s.state)
''')
    measure: 'down_lines'
    aggregation: 'Total'
    threshold: 0
    dimensions: [
      'deployment'
      'state'
    ]
  }
  {
    name: 'dead-letters'
    displayName: 'stormgate: dead letters per hour'
    description: 'More incident events were dead-lettered in the last hour than the threshold (ingest lines, dead_lettered).'
    severity: 3
    windowSize: 'PT1H'
    evaluationFrequency: 'PT15M'
    query: concat(signals, '''
| where tostring(s.event) == "ingest"
| summarize dead_lettered = sum(tolong(s.dead_lettered))
''')
    measure: 'dead_lettered'
    aggregation: 'Total'
    threshold: deadLettersPerHour
    dimensions: []
  }
  {
    name: 'redis-memory'
    displayName: 'stormgate: Redis memory'
    description: 'Redis memory use is above the threshold of maxmemory (redis lines, used_memory_percent; -1 when Redis reports no maxmemory).'
    severity: 2
    windowSize: 'PT5M'
    evaluationFrequency: 'PT5M'
    query: concat(signals, '''
| where tostring(s.event) == "redis"
| summarize used_memory_percent = max(tolong(s.used_memory_percent))
''')
    measure: 'used_memory_percent'
    aggregation: 'Maximum'
    threshold: redisMemoryPercent
    dimensions: []
  }
  {
    name: 'function-failures'
    displayName: 'stormgate: failed invocations'
    description: 'A function answered 5xx more often than the threshold (the handler logs "invocation failed" with the route).'
    severity: 2
    windowSize: 'PT15M'
    evaluationFrequency: 'PT5M'
    query: '''
traces
| where tostring(customDimensions.Category) == "Host.Function.Console"
| extend s = parse_json(message)
| where tostring(s.target) == "stormgate_handlers::app" and tostring(s.message) == "invocation failed"
| summarize failures = count() by path = tostring(s.span.path)
'''
    measure: 'failures'
    aggregation: 'Total'
    threshold: functionFailures
    dimensions: [
      'path'
    ]
  }
  {
    name: 'poison-messages'
    displayName: 'stormgate: hand-off messages poisoned'
    description: 'The host moved a hand-off message to summarize-premium-poison or summarize-standard-poison after its last delivery failed (the host\'s own warning).'
    severity: 2
    windowSize: 'PT15M'
    evaluationFrequency: 'PT5M'
    query: '''
traces
| where message startswith "Message has reached MaxDequeueCount of" and message has "-poison"
| summarize poisoned = count()
'''
    measure: 'poisoned'
    aggregation: 'Total'
    threshold: 0
    dimensions: []
  }
]

resource alerts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [
  for rule in rules: {
    name: 'stormgate-${rule.name}'
    location: location
    tags: tags
    kind: 'LogAlert'
    properties: {
      displayName: rule.displayName
      description: rule.description
      severity: rule.severity
      enabled: true
      scopes: [
        appInsights.id
      ]
      evaluationFrequency: rule.evaluationFrequency
      windowSize: rule.windowSize
      criteria: {
        allOf: [
          {
            query: rule.query
            timeAggregation: rule.aggregation
            metricMeasureColumn: rule.measure
            operator: 'GreaterThan'
            threshold: rule.threshold
            dimensions: [
              for dimension in rule.dimensions: {
                name: dimension
                operator: 'Include'
                values: [
                  '*'
                ]
              }
            ]
            failingPeriods: {
              numberOfEvaluationPeriods: 1
              minFailingPeriodsToAlert: 1
            }
          }
        ]
      }
      autoMitigate: true
      actions: actions
    }
  }
]

output alertRuleNames array = [for (rule, i) in rules: alerts[i].name]
