// Diagnostic settings that send resource logs to the Log Analytics workspace: Key Vault's audit log (every secret
// read, by whom), Azure OpenAI's request and audit logs (each call with its deployment, status and duration; 429s
// included), and the function app's logs. Category names and groups as Azure Monitor's "Supported logs" reference
// lists them for each resource type (Microsoft.KeyVault/vaults: AuditEvent, group audit; Microsoft.
// CognitiveServices/accounts: Audit, RequestResponse, Trace, group allLogs; Microsoft.Web/sites: FunctionAppLogs).
//
// Microsoft.Insights/diagnosticSettings has no stable API version newer than 2016-09-01, whose shape is the
// legacy per-resource "service" setting; 2021-05-01-preview is the version the Bicep type index and the Azure
// Monitor documentation use for category groups (an exception the API-version rule names).

@description('Resource id of the Log Analytics workspace.')
param workspaceId string

@description('Key Vault whose audit log is sent.')
param keyVaultName string

@description('Azure OpenAI account whose request logs are sent.')
param openAiAccountName string

@description('Function app whose logs are sent.')
param functionAppName string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource openAi 'Microsoft.CognitiveServices/accounts@2025-06-01' existing = {
  name: openAiAccountName
}

resource app 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource vaultAudit 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-workspace'
  scope: vault
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        categoryGroup: 'audit'
        enabled: true
      }
    ]
  }
}

resource openAiRequests 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-workspace'
  scope: openAi
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

resource functionLogs 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-workspace'
  scope: app
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        category: 'FunctionAppLogs'
        enabled: true
      }
    ]
  }
}
