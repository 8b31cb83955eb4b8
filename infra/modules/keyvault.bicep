// Key Vault (RBAC authorization) holding the secrets the app settings reference. Secret values arrive as secure
// parameters at deploy time and are never defaulted; optional secrets are only stored when supplied.

@description('Azure region for the vault.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Vault name (3-24 characters).')
@minLength(3)
@maxLength(24)
param name string

@description('Purge protection: required for production, left off in dev so a torn-down vault name can be reused.')
param enablePurgeProtection bool

@description('Password of the Kafka (SASL) user the classify trigger signs in as.')
@secure()
param kafkaPassword string

@description('Password of the ServiceNow integration user; empty when work-note write-back is off.')
@secure()
param serviceNowPassword string

@description('Azure AI Search API key; empty when search enrichment is off.')
@secure()
param searchApiKey string

@description('Full URL of an existing Redis, credentials included; empty when Azure Managed Redis is deployed.')
@secure()
param existingRedisUrl string

@description('Enabled, or Disabled when the vault is reached through its private endpoint only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    // ARM rejects `false` once purge protection was on; `null` leaves it off.
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: publicNetworkAccess == 'Enabled' ? 'Allow' : 'Deny'
      bypass: 'AzureServices'
    }
  }
}

resource kafkaPasswordSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'kafka-password'
  properties: {
    value: kafkaPassword
  }
}

resource serviceNowPasswordSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(serviceNowPassword)) {
  parent: vault
  name: 'servicenow-password'
  properties: {
    value: serviceNowPassword
  }
}

resource searchApiKeySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(searchApiKey)) {
  parent: vault
  name: 'search-api-key'
  properties: {
    value: searchApiKey
  }
}

resource existingRedisUrlSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(existingRedisUrl)) {
  parent: vault
  name: 'redis-url'
  properties: {
    value: existingRedisUrl
  }
}

// Versionless references: App Service picks up a rotated secret within a day.
var secretUriBase = '${vault.properties.vaultUri}secrets/'

output name string = vault.name
output id string = vault.id
output uri string = vault.properties.vaultUri
output kafkaPasswordRef string = '@Microsoft.KeyVault(SecretUri=${secretUriBase}${kafkaPasswordSecret.name}/)'
output serviceNowPasswordRef string = '@Microsoft.KeyVault(SecretUri=${secretUriBase}servicenow-password/)'
output searchApiKeyRef string = '@Microsoft.KeyVault(SecretUri=${secretUriBase}search-api-key/)'
output existingRedisUrlRef string = '@Microsoft.KeyVault(SecretUri=${secretUriBase}redis-url/)'
