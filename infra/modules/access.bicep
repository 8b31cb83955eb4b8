// Role assignments for the app's managed identity. Built-in role definition ids are listed once, by their
// documented names, and every assignment refers to them by name.

@description('Object (principal) id of the app identity.')
param principalId string

@description('Azure OpenAI account the app calls.')
param openAiAccountName string

@description('Key Vault holding the referenced secrets.')
param keyVaultName string

@description('Functions host storage account.')
param storageAccountName string

@description('Application Insights component the host sends telemetry to.')
param appInsightsName string

// Ids from the Azure built-in roles reference (learn.microsoft.com/azure/role-based-access-control/built-in-roles).
var builtInRoles = {
  'Cognitive Services OpenAI User': '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd'
  'Key Vault Secrets User': '4633458b-17de-408a-b874-0445c86b69e6'
  'Storage Blob Data Owner': 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  'Storage Queue Data Contributor': '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  'Storage Table Data Contributor': '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  'Monitoring Metrics Publisher': '3913510d-42f4-4e42-8a64-420c390055eb'
}

// The Functions host with identity-based AzureWebJobsStorage needs blobs (leases, keys, deployment package),
// queues (the queue triggers and their poison queues) and tables (diagnostic events).
var storageRoles = [
  'Storage Blob Data Owner'
  'Storage Queue Data Contributor'
  'Storage Table Data Contributor'
]

resource openAi 'Microsoft.CognitiveServices/accounts@2025-06-01' existing = {
  name: openAiAccountName
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource storage 'Microsoft.Storage/storageAccounts@2024-01-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource openAiUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(openAi.id, principalId, builtInRoles['Cognitive Services OpenAI User'])
  scope: openAi
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoles['Cognitive Services OpenAI User'])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource secretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, principalId, builtInRoles['Key Vault Secrets User'])
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoles['Key Vault Secrets User'])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource storageData 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for role in storageRoles: {
    name: guid(storage.id, principalId, builtInRoles[role])
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoles[role])
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]

// Application Insights accepts the host's telemetry over Entra ID only (local authentication is off).
resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, principalId, builtInRoles['Monitoring Metrics Publisher'])
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoles['Monitoring Metrics Publisher'])
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
