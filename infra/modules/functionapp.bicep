// The Linux function app that runs the stormgate custom handler, its hosting plan, and every app setting the
// handler and the Functions host read. Flex Consumption (FC1) by default; Elastic Premium (EP1-EP3) on request,
// with runtime scale monitoring so the Kafka trigger scales on consumer lag.

import { tierDeployments } from 'openai.bicep'

@description('Azure region for the plan and the app.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Hosting plan name.')
param planName string

@description('Function app name (also the default host name prefix).')
param appName string

@description('FC1 = Flex Consumption; EP1-EP3 = Elastic Premium.')
@allowed([
  'FC1'
  'EP1'
  'EP2'
  'EP3'
])
param planSku string

@description('Flex Consumption: most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int

@description('Flex Consumption: memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int

@description('Elastic Premium: instances kept always ready.')
@minValue(1)
param elasticMinimumInstances int

@description('Elastic Premium: most instances the plan bursts to.')
@minValue(1)
@maxValue(100)
param elasticMaximumInstances int

@description('User-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity.')
param identityClientId string

@description('Object (principal) id of that identity.')
param identityPrincipalId string

@description('Functions host storage account name.')
param storageAccountName string

@description('Blob container URL for the Flex Consumption deployment package.')
param deploymentContainerUrl string

@description('Azure Files share for the Elastic Premium content.')
param contentShareName string

@description('Application Insights connection string.')
@secure()
param appInsightsConnectionString string

@description('Azure OpenAI endpoint, e.g. https://<account>.openai.azure.com/.')
param openAiEndpoint string

@description('Azure OpenAI data-plane API version the handler calls.')
param openAiApiVersion string

@description('Model deployments per tier, the same object the Azure OpenAI module deploys from.')
param modelDeployments tierDeployments

@description('Fraction of each deployment budget the governor keeps in reserve.')
param governorHeadroom string

@description('Redis URL when Azure Managed Redis is deployed; empty when an existing Redis is used.')
param managedRedisUrl string

@description('How the handler signs in to an existing Redis: url (credentials in the URL) or entra.')
@allowed([
  'url'
  'entra'
])
param existingRedisAuth string

@description('Key Vault base URL, for settings of the form keyvault:<secret-name>.')
param keyVaultUri string

@description('Key Vault references to the stored secrets.')
param vaultReferences object

@description('Kafka bootstrap servers, host:port[,host:port].')
param kafkaBrokers string

@description('Topic carrying ServiceNow incident events.')
param kafkaTopic string

@description('Consumer group of the classify trigger.')
param kafkaConsumerGroup string

@description('SASL user name for Kafka.')
param kafkaUsername string

@description('Topic for customer notifications.')
param kafkaNotificationsTopic string

@description('ServiceNow instance URL, e.g. https://example.service-now.com; empty turns work-note write-back off.')
param serviceNowInstanceUrl string

@description('ServiceNow integration user name.')
param serviceNowUsername string

@description('Azure AI Search endpoint; empty turns search enrichment off.')
param searchEndpoint string

@description('Azure AI Search index name.')
param searchIndex string

@description('RUST_LOG filter for the handler.')
param rustLog string

var isFlexConsumption = planSku == 'FC1'
var useManagedRedis = !empty(managedRedisUrl)

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: isFlexConsumption ? 'functionapp' : 'elastic'
  sku: isFlexConsumption
    ? {
        name: 'FC1'
        tier: 'FlexConsumption'
      }
    : {
        name: planSku
        tier: 'ElasticPremium'
      }
  properties: isFlexConsumption
    ? {
        reserved: true
      }
    : {
        reserved: true
        maximumElasticWorkerCount: elasticMaximumInstances
      }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    keyVaultReferenceIdentity: identityId
    functionAppConfig: isFlexConsumption
      ? {
          deployment: {
            storage: {
              type: 'blobContainer'
              value: deploymentContainerUrl
              authentication: {
                type: 'UserAssignedIdentity'
                userAssignedIdentityResourceId: identityId
              }
            }
          }
          scaleAndConcurrency: {
            maximumInstanceCount: maximumInstanceCount
            instanceMemoryMB: instanceMemoryMB
          }
          runtime: {
            name: 'custom'
            version: '1.0'
          }
        }
      : null
    siteConfig: isFlexConsumption
      ? {
          minTlsVersion: '1.2'
        }
      : {
          minTlsVersion: '1.2'
          ftpsState: 'Disabled'
          linuxFxVersion: ''
          minimumElasticInstanceCount: elasticMinimumInstances
          // Without this the Kafka trigger does not scale on consumer lag on Elastic Premium.
          functionsRuntimeScaleMonitoringEnabled: true
        }
  }
}

// Settings every deployment writes. The handler validates them at start-up.
var coreSettings = {
  AzureWebJobsStorage__accountName: storageAccountName
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  APPLICATIONINSIGHTS_CONNECTION_STRING: appInsightsConnectionString
  // Telemetry signs in as the app identity: Application Insights has local authentication off.
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  AZURE_CLIENT_ID: identityClientId
  AZURE_OPENAI_ENDPOINT: openAiEndpoint
  AZURE_OPENAI_API_VERSION: openAiApiVersion
  AZURE_OPENAI_AUTH: 'managed_identity'
  // Deployment names, models and budgets come from the same object the Azure OpenAI module deploys, so the
  // governor's tokens per minute always equal the deployment capacity (1 unit = 1,000 TPM).
  STORMGATE_PREMIUM_DEPLOYMENT: modelDeployments.premium.name
  STORMGATE_PREMIUM_MODEL: modelDeployments.premium.model
  STORMGATE_PREMIUM_TPM: string(modelDeployments.premium.capacity * 1000)
  STORMGATE_STANDARD_DEPLOYMENT: modelDeployments.standard.name
  STORMGATE_STANDARD_MODEL: modelDeployments.standard.model
  STORMGATE_STANDARD_TPM: string(modelDeployments.standard.capacity * 1000)
  STORMGATE_GOVERNOR_HEADROOM: governorHeadroom
  STORMGATE_REDIS_URL: useManagedRedis ? managedRedisUrl : vaultReferences.existingRedisUrl
  STORMGATE_REDIS_AUTH: useManagedRedis ? 'entra' : existingRedisAuth
  STORMGATE_KEY_VAULT_URL: keyVaultUri
  STORMGATE_LOG_FORMAT: 'json'
  // What Redis keeps (it runs with noeviction): tickets 14 days after their last update, at most 5,000 dead
  // letters. docs/operations.md, *Redis memory*, sizes Redis for these values.
  STORMGATE_RETENTION_DAYS: '14'
  STORMGATE_DEAD_LETTER_MAX: '5000'
  RUST_LOG: rustLog
  KAFKA_BROKERS: kafkaBrokers
  KAFKA_TOPIC: kafkaTopic
  KAFKA_CONSUMER_GROUP: kafkaConsumerGroup
  KAFKA_USERNAME: kafkaUsername
  KAFKA_PASSWORD: vaultReferences.kafkaPassword
  KAFKA_NOTIFICATIONS_TOPIC: kafkaNotificationsTopic
}

// Entra sign-in to Redis names the identity's object id as the Redis user.
var redisUserSettings = useManagedRedis || existingRedisAuth == 'entra'
  ? {
      STORMGATE_REDIS_USER: identityPrincipalId
    }
  : {}

var serviceNowSettings = empty(serviceNowInstanceUrl)
  ? {}
  : {
      SERVICENOW_INSTANCE_URL: serviceNowInstanceUrl
      SERVICENOW_USERNAME: serviceNowUsername
      SERVICENOW_PASSWORD: vaultReferences.serviceNowPassword
    }

var searchSettings = empty(searchEndpoint)
  ? {}
  : {
      STORMGATE_SEARCH_ENDPOINT: searchEndpoint
      STORMGATE_SEARCH_INDEX: searchIndex
      STORMGATE_SEARCH_API_KEY: vaultReferences.searchApiKey
    }

// Flex Consumption takes the runtime from functionAppConfig and rejects these settings; Elastic Premium needs
// them, plus the Azure Files content share (its connection string stays in Key Vault, which the platform cannot
// validate at creation, hence the skip flag).
var planSettings = isFlexConsumption
  ? {}
  : {
      FUNCTIONS_EXTENSION_VERSION: '~4'
      FUNCTIONS_WORKER_RUNTIME: 'custom'
      WEBSITE_CONTENTAZUREFILECONNECTIONSTRING: vaultReferences.contentShareConnection
      WEBSITE_CONTENTSHARE: contentShareName
      WEBSITE_SKIP_CONTENTSHARE_VALIDATION: '1'
    }

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: app
  name: 'appsettings'
  properties: union(coreSettings, redisUserSettings, serviceNowSettings, searchSettings, planSettings)
}

output name string = app.name
output defaultHostName string = app.properties.defaultHostName
